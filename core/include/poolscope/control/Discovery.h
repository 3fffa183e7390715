#pragma once
// Where control sockets live, so `poolscope ctl PID` and the GUI's "Attach..." can find targets
// without being told a path. Each controllable process creates <dir>/<pid>.sock, where <dir> is
//   $POOLSCOPE_CONTROL_DIR        when set (a launcher's private directory), else
//   $XDG_RUNTIME_DIR/poolscope    when XDG_RUNTIME_DIR is set (per-user, tmpfs, mode 0700), else
//   /tmp/poolscope-<uid>          created 0700 and checked to be ours and private.
// The directory is the first line of defence (mode 0700); the server's SO_PEERCRED uid check is
// the second.

#include "poolscope/Result.h"
#include "poolscope/control/LaunchEnv.h" // kEnvControlDir, kEnvListen

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace poolscope::control {

// The discovery directory for this user (not created).
std::string defaultControlDir();

// Creates dir (mode 0700) if missing and checks it is a real directory owned by us that no one
// else can enter; an unsafe directory is an error in plain words, never silently used.
Status ensurePrivateDir(const std::string& dir);

std::string socketPathForPid(const std::string& dir, int64_t pid);

// POOLSCOPE_LISTEN's value: nullopt for "0", "off", "no", "false" (no server); "" for "1", "on",
// "yes", "true" or empty (the discoverable <dir>/<pid>.sock); the path for "unix:/path" or
// "/path". Anything else (e.g. "host:port") is InvalidArgument, in plain words.
Result<std::optional<std::string>> socketPathFromListen(const std::string& listen);

struct Target {
    int64_t pid = 0; // 0 when the socket name is not <pid>.sock
    std::string socketPath;
    std::string commandLine; // from /proc/<pid>/cmdline, "" when unreadable
};

// Live targets in dir (default: defaultControlDir()), sorted by pid. Sockets of processes that
// no longer exist are skipped, and removed when removeStale is set. A socket not named after a
// pid is listed (pid 0) only while something listens on it; a stale one is skipped, not removed.
std::vector<Target> listTargets(const std::string& dir = "", bool removeStale = false);

// TARGET as typed by a person: a pid ("1234") or a socket path. NotFound with a helpful message
// (listing the targets that do exist) when a pid has no socket.
Result<std::string> resolveTarget(const std::string& target, const std::string& dir = "");

} // namespace poolscope::control

#include "poolscope/control/Discovery.h"
#include "poolscope/control/UnixSocket.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <dirent.h>
#include <fstream>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

namespace poolscope::control {

std::string defaultControlDir() {
    if (const char* d = std::getenv(kEnvControlDir); d && *d) return d;
    if (const char* x = std::getenv("XDG_RUNTIME_DIR"); x && x[0] == '/')
        return std::string(x) + "/poolscope";
    return "/tmp/poolscope-" + std::to_string(getuid());
}

Status ensurePrivateDir(const std::string& dir) {
    if (dir.empty()) return Error{ErrorCode::InvalidArgument, "empty control directory"};
    if (mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST)
        return Error{ErrorCode::WriteFailed,
                     "cannot create control directory " + dir + ": " + std::strerror(errno)};
    struct stat st {};
    // lstat: a symlink planted by someone else in /tmp must not redirect our sockets.
    if (lstat(dir.c_str(), &st) != 0)
        return Error{ErrorCode::NotReadable, "cannot inspect " + dir + ": " + std::strerror(errno)};
    if (!S_ISDIR(st.st_mode))
        return Error{ErrorCode::InvalidArgument, dir + " exists but is not a directory"};
    if (st.st_uid != getuid())
        return Error{ErrorCode::NotReadable,
                     dir + " belongs to another user; refusing to put control sockets there"};
    if ((st.st_mode & 077) != 0) {
        // Ours but too open: tighten it rather than fail (e.g. created by an older build).
        if (chmod(dir.c_str(), 0700) != 0)
            return Error{ErrorCode::NotReadable,
                         dir + " is accessible to other users and cannot be made private"};
    }
    return {};
}

Result<std::optional<std::string>> socketPathFromListen(const std::string& listen) {
    std::string v = listen;
    for (char& c : v)
        c = char(std::tolower(static_cast<unsigned char>(c)));
    if (v == "0" || v == "off" || v == "no" || v == "false") return std::optional<std::string>();
    if (v.empty() || v == "1" || v == "on" || v == "yes" || v == "true")
        return std::optional<std::string>(std::string());
    if (listen.rfind("unix:", 0) == 0) return std::optional<std::string>(listen.substr(5));
    if (listen[0] == '/') return std::optional<std::string>(listen);
    return Error{ErrorCode::InvalidArgument,
                 std::string(kEnvListen) + "=" + listen +
                     " is not understood (use 1, or unix:/path/to.sock; only local Unix sockets "
                     "are supported)"};
}

std::string socketPathForPid(const std::string& dir, int64_t pid) {
    return dir + "/" + std::to_string(pid) + ".sock";
}

namespace {

bool processAlive(int64_t pid) {
    if (pid <= 0) return false;
    return kill(static_cast<pid_t>(pid), 0) == 0 || errno == EPERM;
}

std::string commandLineOf(int64_t pid) {
    std::ifstream f("/proc/" + std::to_string(pid) + "/cmdline", std::ios::binary);
    std::string s((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    while (!s.empty() && s.back() == '\0')
        s.pop_back();
    std::replace(s.begin(), s.end(), '\0', ' ');
    return s;
}

// Whether something listens on a socket whose name says no pid: a refused connect means a stale
// file (its server is gone). Such a file used to be listed as target "0" (issue #12).
bool socketListening(const std::string& path) {
    sockaddr_un addr;
    if (!makeUnixAddress(path, addr)) return false;
    const int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0) return false;
    const int rc = connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
    const bool listening = rc == 0 || errno == EAGAIN || errno == EINPROGRESS;
    close(fd);
    return listening;
}

bool parsePid(const std::string& s, int64_t& pid) {
    if (s.empty() || s.size() > 10) return false;
    pid = 0;
    for (char c : s) {
        if (c < '0' || c > '9') return false;
        pid = pid * 10 + (c - '0');
    }
    return pid > 0;
}

} // namespace

std::vector<Target> listTargets(const std::string& dirIn, bool removeStale) {
    std::string dir = dirIn.empty() ? defaultControlDir() : dirIn;
    std::vector<Target> out;
    DIR* d = opendir(dir.c_str());
    if (!d) return out;
    while (dirent* e = readdir(d)) {
        std::string name = e->d_name;
        if (name.size() < 6 || name.compare(name.size() - 5, 5, ".sock") != 0) continue;
        Target t;
        t.socketPath = dir + "/" + name;
        struct stat st {};
        if (lstat(t.socketPath.c_str(), &st) != 0 || !S_ISSOCK(st.st_mode)) continue;
        if (parsePid(name.substr(0, name.size() - 5), t.pid)) {
            if (!processAlive(t.pid)) {
                if (removeStale) unlink(t.socketPath.c_str());
                continue;
            }
            t.commandLine = commandLineOf(t.pid);
        } else if (!socketListening(t.socketPath)) {
            continue; // stale, and not named by PoolScope: skipped, never removed
        }
        out.push_back(std::move(t));
    }
    closedir(d);
    std::sort(out.begin(), out.end(), [](const Target& a, const Target& b) {
        return a.pid != b.pid ? a.pid < b.pid : a.socketPath < b.socketPath;
    });
    return out;
}

Result<std::string> resolveTarget(const std::string& target, const std::string& dirIn) {
    int64_t pid = 0;
    if (!parsePid(target, pid)) {
        struct stat st {};
        if (stat(target.c_str(), &st) != 0 && (errno == EACCES || errno == EPERM))
            return Error{ErrorCode::NotReadable, "permission refused: cannot reach " + target +
                                                     " (it belongs to another user)"};
        if (stat(target.c_str(), &st) != 0)
            return Error{ErrorCode::NotFound, "no such target: " + target +
                                                  " is neither a pid nor an existing socket path"};
        if (!S_ISSOCK(st.st_mode))
            return Error{ErrorCode::InvalidArgument, target + " is not a socket"};
        return target;
    }
    std::string dir = dirIn.empty() ? defaultControlDir() : dirIn;
    std::string path = socketPathForPid(dir, pid);
    struct stat st {};
    if (stat(path.c_str(), &st) == 0 && processAlive(pid)) return path;
    std::string msg =
        "no such target: no PoolScope control socket for pid " + target + " (" + path + ")";
    if (!processAlive(pid))
        msg += "; no process with that pid is running";
    else
        msg += "; was it started with 'poolscope record --listen' or POOLSCOPE_LISTEN=1?";
    auto targets = listTargets(dir);
    if (!targets.empty()) {
        msg += "\nrunning targets:";
        for (const auto& t : targets)
            msg += "\n  " + std::to_string(t.pid) + "  " + t.commandLine;
    }
    return Error{ErrorCode::NotFound, msg};
}

} // namespace poolscope::control

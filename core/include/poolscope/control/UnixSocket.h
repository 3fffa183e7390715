#pragma once
// Small helpers around AF_UNIX stream sockets shared by the control client and server. Every
// descriptor is close-on-exec (the target's own children must not inherit it) and writes use
// MSG_NOSIGNAL (a vanished peer must never raise SIGPIPE inside the target).

#include "poolscope/Result.h"

#include <cstddef>
#include <cstdint>
#include <string>

struct sockaddr_un;

namespace poolscope::control {

// False when path does not fit sun_path (108 bytes on Linux); message says so.
Status makeUnixAddress(const std::string& path, sockaddr_un& addr);

// Non-blocking connect with a deadline. Errors in plain words: NotFound (no socket / nobody
// listening), NotReadable (permission refused), Io (timeout, other).
Result<int> connectUnix(const std::string& path, int timeoutMs);

// Sends all bytes before the deadline (non-blocking fd, poll between partial writes).
Status sendAll(int fd, const uint8_t* data, size_t n, int64_t deadlineMs);

int64_t monotonicMs();
int64_t monotonicNs();

} // namespace poolscope::control

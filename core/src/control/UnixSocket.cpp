#include "poolscope/control/UnixSocket.h"

#include <cerrno>
#include <cstring>
#include <ctime>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

namespace poolscope::control {

int64_t monotonicNs() {
    timespec ts{};
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return int64_t(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

int64_t monotonicMs() {
    return monotonicNs() / 1000000;
}

Status makeUnixAddress(const std::string& path, sockaddr_un& addr) {
    std::memset(&addr, 0, sizeof addr);
    addr.sun_family = AF_UNIX;
    if (path.empty()) return Error{ErrorCode::InvalidArgument, "empty socket path"};
    if (path.size() >= sizeof addr.sun_path)
        return Error{ErrorCode::InvalidArgument,
                     "socket path too long (" + std::to_string(path.size()) + " bytes, limit " +
                         std::to_string(sizeof addr.sun_path - 1) + "): " + path};
    std::memcpy(addr.sun_path, path.data(), path.size());
    return {};
}

Result<int> connectUnix(const std::string& path, int timeoutMs) {
    sockaddr_un addr;
    if (Status s = makeUnixAddress(path, addr); !s) return s.error();
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0) return Error{ErrorCode::Io, std::string("socket(): ") + std::strerror(errno)};
    int64_t deadline = monotonicMs() + timeoutMs;
    for (;;) {
        if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0) return fd;
        int e = errno;
        if (e == EINTR) continue;
        if (e == EAGAIN || e == EINPROGRESS) {
            // AF_UNIX: the listener's backlog is full. Wait a little and retry until the deadline.
            if (monotonicMs() >= deadline) {
                close(fd);
                return Error{ErrorCode::Io, "timed out connecting to " + path +
                                                " (the target does not accept connections)"};
            }
            usleep(10000);
            continue;
        }
        close(fd);
        if (e == ENOENT)
            return Error{ErrorCode::NotFound, "no such target: " + path + " does not exist"};
        if (e == ECONNREFUSED)
            return Error{ErrorCode::NotFound,
                         "no such target: nothing listens on " + path + " (the target has exited)"};
        if (e == EACCES || e == EPERM)
            return Error{ErrorCode::NotReadable, "permission refused: cannot connect to " + path +
                                                     " (it belongs to another user)"};
        return Error{ErrorCode::Io, "cannot connect to " + path + ": " + std::strerror(e)};
    }
}

Status sendAll(int fd, const uint8_t* data, size_t n, int64_t deadlineMs) {
    size_t done = 0;
    while (done < n) {
        ssize_t w = send(fd, data + done, n - done, MSG_NOSIGNAL);
        if (w > 0) {
            done += size_t(w);
            continue;
        }
        if (w < 0 && errno == EINTR) continue;
        if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            int64_t left = deadlineMs - monotonicMs();
            if (left <= 0) return Error{ErrorCode::Io, "timed out sending to the target"};
            pollfd p{fd, POLLOUT, 0};
            poll(&p, 1, int(left));
            continue;
        }
        return Error{ErrorCode::Io,
                     std::string("connection lost while sending: ") + std::strerror(errno)};
    }
    return {};
}

} // namespace poolscope::control

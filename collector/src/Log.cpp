#include "Log.h"

#include <atomic>
#include <cstdarg>
#include <cstdio>
#include <unistd.h>

namespace poolscope::collector {

namespace {
std::atomic<bool> g_logged[static_cast<int>(LogKey::Count)];

void vlog(const char* fmt, va_list ap) {
    char buf[1024];
    int n = std::snprintf(buf, sizeof buf, "[poolscope] ");
    int m = std::vsnprintf(buf + n, sizeof buf - size_t(n) - 1, fmt, ap);
    if (m < 0) return;
    size_t len = size_t(n) + (size_t(m) < sizeof buf - size_t(n) - 1 ? size_t(m) : sizeof buf - size_t(n) - 2);
    buf[len++] = '\n';
    ssize_t w = ::write(2, buf, len);
    (void)w;
}
} // namespace

void logOnce(LogKey key, const char* fmt, ...) {
    if (g_logged[static_cast<int>(key)].exchange(true)) return;
    va_list ap;
    va_start(ap, fmt);
    vlog(fmt, ap);
    va_end(ap);
}

void logLine(const char* fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vlog(fmt, ap);
    va_end(ap);
}

} // namespace poolscope::collector

#pragma once
// Small helpers shared by the CLI verbs.

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <unistd.h>
#include <sys/stat.h>
#include <memory>
#include <string>
#include <vector>

#include "poolscope/Result.h"
#include "poolscope/TraceReader.h"

namespace poolscope::cli {

// Opens a trace; on failure prints "poolscope: <plain message>" to stderr, sets exitCode to the
// error's distinct code and returns null.
inline std::unique_ptr<TraceReader> openTraceOrReport(const std::string& path, int& exitCode) {
    auto r = TraceReader::open(path);
    if (!r) {
        std::fprintf(stderr, "poolscope: %s\n", r.error().message.c_str());
        exitCode = exitCodeFor(r.error().code);
        return nullptr;
    }
    return std::move(r.value());
}

// A failed write takes its half-written output away, but only a regular file: `-o /dev/null`,
// a FIFO or a symlink is not the command's to remove (as root, removing /dev/null replaces the
// device with a plain file for every program after it).
inline void removeFailedOutput(const std::string& path) {
    struct stat st {};
    if (path != "-" && ::lstat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode)) std::remove(path.c_str());
}

inline void reportError(const Error& e, int& exitCode) {
    std::fprintf(stderr, "poolscope: %s\n", e.message.c_str());
    exitCode = exitCodeFor(e.code);
}

// Prints one warning per damaged part of the trace (issue #12: never a silent wrong answer) and
// returns the exit status for it: Corrupt's when anything is damaged, else 0. The output above
// it still shows what is intact.
inline int warnDamage(const TraceReader& r) {
    const std::vector<TraceDamage> damage = r.damage();
    for (const TraceDamage& d : damage) {
        std::string line = "poolscope: warning: '" + r.path() + "' is damaged: " + d.what;
        if (d.events) line += " [" + std::to_string(d.events) + " events affected]";
        std::fprintf(stderr, "%s\n", line.c_str());
    }
    return damage.empty() ? 0 : exitCodeFor(ErrorCode::Corrupt);
}

// A progress line on stderr, only for a person watching a terminal and only once the work
// (report's read, a names pass) has taken long enough to wonder about: scripts and short traces
// see nothing.
class TtyProgress {
public:
    explicit TtyProgress(const char* what) : what_(what), tty_(isatty(STDERR_FILENO) == 1), start_(Clock::now()) {
        // Tests under a terminal ask for the line at once instead of after half a second.
        if (const char* ms = std::getenv("POOLSCOPE_PROGRESS_AFTER_MS")) after_ = std::chrono::milliseconds(std::atoi(ms));
    }
    ~TtyProgress() {
        if (shown_) std::fprintf(stderr, "\r%60s\r", "");
    }
    // The callback for a pass's progress: empty where no line can be shown, so that a script's
    // run does no work for it (a pass asked for progress first counts the trace's events).
    std::function<void(uint64_t, uint64_t)> callback() {
        if (!tty_) return {};
        return [this](uint64_t d, uint64_t t) { (*this)(d, t); };
    }
    // The next pass of the same command: its own words on the same line, from 0%.
    void phase(const char* what) {
        if (what_ == what) return;
        what_ = what;
        if (!tty_ || !shown_) return;
        std::fprintf(stderr, "\r%60s", "");
        last_ = {}; // shown at its first call
        (*this)(0, 1);
    }
    void operator()(uint64_t done, uint64_t total) {
        if (!tty_ || total == 0) return;
        const auto now = Clock::now();
        if (now - start_ < after_ || now - last_ < std::chrono::milliseconds(100))
            return;
        last_ = now;
        shown_ = true;
        std::fprintf(stderr, "\r%s: %3d%%", what_, static_cast<int>(done * 100 / total));
        std::fflush(stderr);
    }

private:
    using Clock = std::chrono::steady_clock;
    const char* what_;
    bool tty_;
    bool shown_ = false;
    Clock::time_point start_;
    Clock::time_point last_{};
    std::chrono::milliseconds after_{500};
};

} // namespace poolscope::cli

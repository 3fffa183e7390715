// `poolscope record [-o FILE] [--sample-period MS] -- PROGRAM ARGS...`: runs PROGRAM with the
// collector injected through CUDA_INJECTION64_PATH, passes its stdio through, forwards SIGINT and
// SIGTERM, exits with its exit code (128+signal if it was killed), then says where the trace is
// and prints a one-screen summary. Everything that can fail is checked before the program runs.

#include <CLI/CLI.hpp>
#include <cerrno>
#include <climits>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <dirent.h>
#include <string>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <vector>

#include "ArgChecks.h"
#include "CliUtil.h"
#include "Commands.h"
#include "poolscope/Report.h"
#include "poolscope/analysis/TraceReport.h"
#include "poolscope/TraceReader.h"
#include "poolscope/TraceWriter.h"
#include "poolscope/Units.h"
#include "poolscope/control/Discovery.h"
#include "poolscope/control/LaunchSpec.h"
#include "poolscope/Symbolizer.h"

namespace poolscope::cli {

namespace {

// An hour: longer is no sampling at all in practice (the collector takes the same bound).
constexpr double kMaxSamplePeriodMs = 3'600'000;

struct RecordOptions {
    std::string output;
    double samplePeriodMs = 1.0;
    std::string collector; // --collector: override the module's location
    std::string listen;    // --listen: POOLSCOPE_LISTEN for the live control server
    bool quiet = false;
    std::string stacks;      // --stacks ("" = the collector's default, auto)
    int stackDepth = 0;      // --stack-depth (0 = the default)
    bool stacksAtFree = false; // --stacks-at-free
    std::vector<std::string> command;
};

volatile sig_atomic_t g_child = 0;

// SIGINT from the terminal already reaches the program (same process group); forward only what
// was sent to poolscope itself (kill), so Ctrl-C is not delivered twice.
void forwardSignal(int sig, siginfo_t* info, void*) {
    if (g_child > 0 && (info == nullptr || info->si_code == SI_USER || info->si_code == SI_QUEUE ||
                        sig == SIGTERM))
        kill(g_child, sig);
}

bool isExecutable(const std::string& p) {
    struct stat st;
    return stat(p.c_str(), &st) == 0 && S_ISREG(st.st_mode) && access(p.c_str(), X_OK) == 0;
}

// The program as execv would find it (PATH search for bare names); empty when not found.
std::string resolveProgram(const std::string& name) {
    if (name.find('/') != std::string::npos) return isExecutable(name) ? name : std::string();
    const char* path = std::getenv("PATH");
    std::string p = path ? path : "/usr/local/bin:/usr/bin:/bin";
    size_t start = 0;
    while (start <= p.size()) {
        size_t end = p.find(':', start);
        if (end == std::string::npos) end = p.size();
        std::string dir = p.substr(start, end - start);
        if (dir.empty()) dir = ".";
        std::string cand = dir + "/" + name;
        if (isExecutable(cand)) return cand;
        start = end + 1;
    }
    return {};
}

std::string absolutePath(const std::string& p) {
    if (!p.empty() && p[0] == '/') return p;
    char cwd[PATH_MAX];
    if (!getcwd(cwd, sizeof cwd)) return p;
    return std::string(cwd) + "/" + p;
}

std::string findCollector(const std::string& override) {
    if (!override.empty()) return isExecutable(override) || access(override.c_str(), R_OK) == 0
                                      ? absolutePath(override)
                                      : std::string();
    if (const char* env = std::getenv(control::kEnvCollector))
        if (access(env, R_OK) == 0) return absolutePath(env);
    const std::string self = selfDir();
    const char* kName = "libpoolscope_collector.so";
    for (const std::string& dir : {self, self + "/../lib/poolscope", self + "/../lib",
                                   self + "/../collector"}) {
        std::string cand = dir + "/" + kName;
        if (access(cand.c_str(), R_OK) == 0) {
            char real[PATH_MAX];
            return realpath(cand.c_str(), real) ? std::string(real) : cand;
        }
    }
    return {};
}

std::string defaultOutput(const std::string& program) {
    std::string base = program.substr(program.rfind('/') + 1);
    char stamp[32];
    std::time_t now = std::time(nullptr);
    std::strftime(stamp, sizeof stamp, "%Y%m%d-%H%M%S", std::localtime(&now));
    return base + "-" + stamp + ".poolscope";
}

// Traces written by child processes of the program: "<out minus .poolscope>.<pid>.poolscope".
// Traces of forked children beside out: <stem>.<pid>.poolscope (+ tail, e.g. ".partial").
std::vector<std::string> childTraces(const std::string& out, const std::string& tail = "") {
    std::vector<std::string> found;
    const std::string ext = ".poolscope";
    std::string stem = out.size() > ext.size() && out.ends_with(ext)
                           ? out.substr(0, out.size() - ext.size())
                           : out;
    std::string dir = ".", prefix = stem;
    if (auto slash = stem.rfind('/'); slash != std::string::npos) {
        dir = stem.substr(0, slash);
        prefix = stem.substr(slash + 1);
    }
    prefix += ".";
    if (DIR* d = opendir(dir.c_str())) {
        while (dirent* e = readdir(d)) {
            std::string n = e->d_name;
            const std::string end = ext + tail;
            if (n.size() > prefix.size() + end.size() && n.starts_with(prefix) &&
                n.ends_with(end)) {
                std::string mid = n.substr(prefix.size(), n.size() - prefix.size() - end.size());
                if (!mid.empty() && mid.find_first_not_of("0123456789") == std::string::npos)
                    found.push_back(dir + "/" + n.substr(0, n.size() - tail.size()));
            }
        }
        closedir(d);
    }
    return found;
}

void printSummary(const std::string& path, bool quiet) {
    auto r = TraceReader::open(path);
    if (!r) {
        std::fprintf(stderr, "poolscope: the trace %s cannot be read: %s\n", path.c_str(),
                     r.error().message.c_str());
        return;
    }
    TraceReader& reader = *r.value();
    auto meta = reader.meta();
    auto summary = reader.summary();
    const bool collected = meta && meta->count("collector");
    if (!collected) {
        std::fprintf(stderr,
                     "poolscope: note: the program never initialized CUDA (the collector was not "
                     "loaded); %s is a valid, empty trace.\n",
                     path.c_str());
        return;
    }
    if (meta) {
        if (auto it = meta->find("collector_disabled_reason"); it != meta->end())
            std::fprintf(stderr, "poolscope: note: the collector switched itself off: %s\n",
                         it->second.c_str());
        if (auto it = meta->find("dropped_events"); it != meta->end() && it->second != "0")
            std::fprintf(stderr,
                         "poolscope: warning: %s events were dropped (rings full); raise "
                         "POOLSCOPE_RING_EVENTS\n",
                         it->second.c_str());
    }
    if (quiet) return;
    // The report's streaming read without the what-if advice (`report` gives it): memory
    // bounded by what is live, not by the hour of events just recorded.
    TraceReportOptions ro;
    ro.report.topN = 3;
    ro.advice = false;
    auto process = reader.process();
    auto rep = [&] {
        // An hour's run takes tens of seconds to summarise: the terminal shows how far.
        TtyProgress progress("summarising the trace");
        ro.progress = progress.callback();
        return reportTrace(reader, ro, path, process ? *process : ProcessInfo{},
                           meta ? *meta : std::map<std::string, std::string>{});
    }();
    if (rep) {
        std::fputs(reportToText(rep->report).c_str(), stderr);
        return;
    }
    if (summary) {
        std::fprintf(stderr, "%llu events, %llu samples\n",
                     (unsigned long long)summary->eventCount,
                     (unsigned long long)summary->sampleCount);
        for (auto& [k, n] : summary->countsByKind)
            std::fprintf(stderr, "  %-22s %llu\n", std::string(eventKindName(k)).c_str(),
                         (unsigned long long)n);
    }
}

int runRecord(RecordOptions& o) {
    if (o.command.empty()) {
        std::fprintf(stderr, "poolscope record: name the program to run, e.g. "
                             "poolscope record -o run.poolscope -- ./train --epochs 1\n");
        return 2;
    }
    const std::string program = resolveProgram(o.command[0]);
    if (program.empty()) {
        std::fprintf(stderr, "poolscope record: program '%s' not found or not executable\n",
                     o.command[0].c_str());
        return 127;
    }
    const std::string collector = findCollector(o.collector);
    if (collector.empty() && !o.collector.empty()) {
        std::fprintf(stderr, "poolscope record: --collector %s: no such readable file\n",
                     o.collector.c_str());
        return 2;
    }
    if (collector.empty()) {
        std::fprintf(stderr,
                     "poolscope record: the collector module (libpoolscope_collector.so) was not "
                     "found next to %s or in ../lib/poolscope; this build may lack CUDA support\n",
                     selfDir());
        return 2;
    }
    if (o.samplePeriodMs < 0) {
        std::fprintf(stderr, "poolscope record: --sample-period must be >= 0 (0 = off)\n");
        return 2;
    }
    if (o.output.empty()) o.output = defaultOutput(program);
    const std::string out = absolutePath(o.output);
    // Creating the trace now proves the location is writable before the program runs, and
    // leaves a valid empty trace if the program never loads CUDA. The collector replaces it.
    // Both write beside the output and rename when complete: a full disk leaves the trace that
    // was there untouched.
    {
        WriterOptions options;
        options.replaceAtClose = true;
        auto w = TraceWriter::create(out, options);
        if (!w) {
            std::fprintf(stderr, "poolscope record: cannot write the trace %s: %s\n", out.c_str(),
                         w.error().message.c_str());
            return 2;
        }
        ProcessInfo p;
        p.collectorVersion = POOLSCOPE_VERSION;
        (void)(*w)->setProcess(p);
        if (Status s = (*w)->close(); !s) {
            std::fprintf(stderr, "poolscope record: cannot write the trace %s: %s\n", out.c_str(),
                         s.error().message.c_str());
            return 2;
        }
    }

    // The same builder as the GUI's Live > Launch: the program sees the same variables either
    // way. What record takes from its own environment: the control dir (for discovery by
    // `poolscope ctl PID`) and POOLSCOPE_LISTEN as a default for --listen.
    control::LaunchSpec spec;
    spec.program = program;
    spec.args.assign(o.command.begin() + 1, o.command.end());
    spec.tracePath = out;
    spec.collectorPath = collector;
    spec.samplePeriodMs = o.samplePeriodMs;
    spec.stacks = o.stacks;
    spec.stackDepth = o.stackDepth;
    spec.stacksAtFree = o.stacksAtFree;
    std::string listen = o.listen;
    if (const char* v = std::getenv(control::kEnvListen); listen.empty() && v) listen = v;
    if (!listen.empty()) {
        auto at = control::socketPathFromListen(listen);
        if (!at)
            std::fprintf(stderr, "poolscope record: note: %s; no live control\n",
                         at.error().message.c_str());
        spec.listen = at && at->has_value();
        if (spec.listen) spec.listenAt = **at;
    }
    if (const char* d = std::getenv(control::kEnvControlDir); d && *d) spec.controlDir = d;
    auto plan = control::buildLaunchPlan(spec, control::currentEnvironment());
    if (!plan) {
        std::fprintf(stderr, "poolscope record: %s\n", plan.error().message.c_str());
        return 2;
    }
    for (const std::string& w : plan->warnings)
        std::fprintf(stderr, "poolscope record: note: %s\n", w.c_str());
    plan->argv[0] = o.command[0]; // as typed (exec uses the resolved plan->program)
    control::ChildExec exec(*plan);

    std::fflush(nullptr);
    pid_t child = fork();
    if (child < 0) {
        std::fprintf(stderr, "poolscope record: fork failed: %s\n", std::strerror(errno));
        return 2;
    }
    if (child == 0) {
        exec.exec();
        std::fprintf(stderr, "poolscope record: cannot run %s: %s\n", program.c_str(),
                     std::strerror(errno));
        _exit(127);
    }
    g_child = child;
    struct sigaction sa {};
    sa.sa_sigaction = forwardSignal;
    sa.sa_flags = SA_SIGINFO | SA_RESTART;
    sigemptyset(&sa.sa_mask);
    struct sigaction oldInt, oldTerm;
    sigaction(SIGINT, &sa, &oldInt);
    sigaction(SIGTERM, &sa, &oldTerm);

    int status = 0;
    while (waitpid(child, &status, 0) < 0 && errno == EINTR) {
    }
    sigaction(SIGINT, &oldInt, nullptr);
    sigaction(SIGTERM, &oldTerm, nullptr);
    int code = 0;
    if (WIFEXITED(status)) {
        code = WEXITSTATUS(status);
    } else if (WIFSIGNALED(status)) {
        code = 128 + WTERMSIG(status);
        std::fprintf(stderr, "poolscope: the program was killed by signal %d (%s)\n",
                     WTERMSIG(status), strsignal(WTERMSIG(status)));
    }

    // A trace the collector could not close (the program was killed, or the disk filled) is
    // still in <out>.partial with what was committed: finish it and move it into place.
    std::vector<std::string> unfinished = childTraces(out, ".partial");
    unfinished.insert(unfinished.begin(), out);
    for (const std::string& t : unfinished) {
        auto done = finishPartialTrace(t);
        if (!done)
            std::fprintf(stderr, "poolscope: warning: the trace was not finished and %s; what "
                                 "was recorded is in %s\n",
                         done.error().message.c_str(), partialPath(t).c_str());
        else if (*done)
            std::fprintf(stderr, "poolscope: note: the collector did not close %s (the program "
                                 "was killed, or the disk filled): it holds what was recorded "
                                 "until then\n",
                         t.c_str());
    }
    // The binaries the frames point into are here now, on the recording machine: name them once
    // and keep the names in the trace (a trace opened elsewhere still shows them).
    for (const std::string& t : std::vector<std::string>{out})
        if (auto n = storeSymbols(t); !n)
            std::fprintf(stderr, "poolscope: note: call sites not symbolized: %s\n",
                         n.error().message.c_str());
    std::fprintf(stderr, "poolscope: trace written to %s\n", out.c_str());
    for (const std::string& c : childTraces(out))
        std::fprintf(stderr, "poolscope: a child process wrote %s\n", c.c_str());
    printSummary(out, o.quiet);
    return code;
}

} // namespace

void registerRecord(CLI::App& app, int& exitCode) {
    auto opts = std::make_shared<RecordOptions>();
    auto* sub = app.add_subcommand(
        "record", "Run a CUDA program with the collector and write a .poolscope trace");
    sub->add_option("-o,--output", opts->output,
                    "Trace file to write (default: PROGRAM-YYYYmmdd-HHMMSS.poolscope)");
    // Below 0.01 ms the period would reach the collector as "0.000000" (off); the upper bound
    // matches the collector's (Config.cpp).
    sub->add_option("--sample-period", opts->samplePeriodMs,
                    "Watermark sampling period in ms between events (0 = off)")
        ->capture_default_str()
        ->check(decimalIn(0.01, kMaxSamplePeriodMs, "off"));
    sub->add_option("--collector", opts->collector, "Collector module to inject (for testing)");
    sub->add_flag_function(
        "--listen", [opts](int64_t) { if (opts->listen.empty()) opts->listen = "1"; },
        "Start the live control server in the program (see 'poolscope ctl')");
    sub->add_option_function<std::string>(
        "--listen-at", [opts](const std::string& p) { opts->listen = "unix:" + p; },
        "Like --listen, on this Unix socket path");
    sub->add_option("--stacks", opts->stacks,
                    "Call sites at each allocation: off, native, python, all, or auto (default: "
                    "Python frames in a Python program, native stacks otherwise; 'all' adds "
                    "native stacks in a Python program, e.g. for PyTorch's autograd thread)")
        ->check(CLI::IsMember({"off", "native", "python", "all", "auto"}));
    sub->add_option("--stack-depth", opts->stackDepth, "Frames kept per stack (default 32)")
        ->check(CLI::Range(1, 256));
    sub->add_flag("--stacks-at-free", opts->stacksAtFree,
                  "Also record the call site of each free (shown as 'Freed at' in the window's "
                  "details; costs a stack capture per free)");
    sub->add_flag("-q,--quiet", opts->quiet, "Print only where the trace is");
    sub->add_option("command", opts->command, "-- PROGRAM ARGS...")->take_all();
    sub->positionals_at_end();
    sub->callback([opts, &exitCode] { exitCode = runRecord(*opts); });
}

} // namespace poolscope::cli

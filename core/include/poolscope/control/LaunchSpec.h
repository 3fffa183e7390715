#pragma once
// Launching a target is data first (STYLE.md #9): this type turns what the user asked for
// (program, arguments, working directory, environment additions, trace path, live control) into
// the exact argv and environment to exec, and is unit-tested. `poolscope record` and the GUI's
// QProcess wrapper both build their launch here and exec it through ChildExec, so a program
// started either way sees the same variables (LaunchEnv.h).

#include "poolscope/Result.h"
#include "poolscope/control/LaunchEnv.h"

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace poolscope::control {

struct LaunchSpec {
    std::string program;           // path, or a name looked up in PATH by the runner
    std::vector<std::string> args; // without argv[0]
    std::string workingDir;        // "" = the launcher's
    // Additions to the inherited environment; they replace inherited values of the same name.
    std::vector<std::pair<std::string, std::string>> env;
    std::string tracePath;       // POOLSCOPE_OUTPUT
    std::string collectorPath;   // libpoolscope_collector.so -> CUDA_INJECTION64_PATH
    double samplePeriodMs = 1.0; // POOLSCOPE_SAMPLE_PERIOD_MS (0 = no sampler)
    bool listen = false;         // POOLSCOPE_LISTEN: the target serves a control socket...
    std::string listenAt;        // ...at this path ("" = <control dir>/<pid>.sock)
    std::string controlDir;      // POOLSCOPE_CONTROL_DIR: the control dir ("" = the default)
    // Call sites (issue #13): POOLSCOPE_STACKS (off|native|python|all|auto; "" = the collector's
    // default, auto) and POOLSCOPE_STACK_DEPTH (1..256; 0 = the default, 32).
    std::string stacks;
    int stackDepth = 0;
    bool stacksAtFree = false; // POOLSCOPE_STACKS_AT_FREE=1: a call site at each free too
    // NVTX_INJECTION64_PATH, so that NVTX ranges reach CUPTI ("" = the collector, which forwards
    // to the CUPTI copy it uses).
    // An inherited value is kept: the user chose it.
    std::string nvtxInjectionPath;
};

struct LaunchPlan {
    std::string program;
    std::vector<std::string> argv; // argv[0] = program
    // "NAME=value" entries for exec, complete but for POOLSCOPE_ROOT_PID: that is the launched
    // process's own pid, known only after fork. Exec environmentFor(pid), i.e. use ChildExec.
    std::vector<std::string> env;
    std::string workingDir;
    std::vector<std::string> warnings; // worth showing (e.g. another tool's injection replaced)

    // The environment the process with this pid must be exec'd with.
    std::vector<std::string> environmentFor(int64_t pid) const;
    // One line for a console pane: the variables PoolScope set, then the quoted command.
    std::string displayCommand() const;
};

// Builds the plan over baseEnv ("NAME=value" entries, usually currentEnvironment()). Inherited
// values of the variables PoolScope sets never leak into the launch. Errors (InvalidArgument, in
// plain words): no program, no collector, no trace path, a bad variable name.
Result<LaunchPlan> buildLaunchPlan(const LaunchSpec& spec, const std::vector<std::string>& baseEnv);

std::vector<std::string> currentEnvironment();

// A plan's argv and environment as exec wants them, built before fork(): the child of a fork
// (or a QProcess child modifier) calls exec() only, which allocates nothing and is
// async-signal-safe. Every launcher execs this way, so POOLSCOPE_ROOT_PID is always the
// launched process's own pid.
class ChildExec {
public:
    explicit ChildExec(const LaunchPlan& plan);
    ChildExec(const ChildExec&) = delete;
    ChildExec& operator=(const ChildExec&) = delete;

    // Sets POOLSCOPE_ROOT_PID to pid (async-signal-safe; exec() does it with getpid()).
    void setPid(int64_t pid) noexcept;
    // execve() of the plan with POOLSCOPE_ROOT_PID = getpid(). Returns only on failure, with
    // errno set; the caller reports it and _exit()s.
    void exec() noexcept;

    char* const* argv() const { return argv_.data(); }
    char* const* envp() const { return envp_.data(); }

private:
    std::string program_;
    std::vector<std::string> strings_; // argv, then env; the last env entry is POOLSCOPE_ROOT_PID
    std::vector<char*> argv_, envp_;
    size_t pidValueAt_ = 0; // offset of the pid digits in that last entry
};

// Shell-style quoting for display ("a b" -> 'a b').
std::string shellQuote(const std::string& s);

} // namespace poolscope::control

#pragma once
// Launching a target is data first (STYLE.md #9): this type turns what the user asked for
// (program, arguments, working directory, environment additions, trace path, live control) into
// the exact argv and environment to exec, and is unit-tested. The GUI's QProcess wrapper and
// `poolscope record` only run the plan.

#include "poolscope/Result.h"

#include <string>
#include <utility>
#include <vector>

namespace poolscope::control {

// Environment variables read by the collector (collector/src/Config.cpp).
inline constexpr const char* kEnvInjection = "CUDA_INJECTION64_PATH";
inline constexpr const char* kEnvOutput = "POOLSCOPE_OUTPUT";
inline constexpr const char* kEnvListen = "POOLSCOPE_LISTEN";
// kEnvControlDir ("POOLSCOPE_CONTROL_DIR") is in Discovery.h.

struct LaunchSpec {
    std::string program;           // path, or a name looked up in PATH by the runner
    std::vector<std::string> args; // without argv[0]
    std::string workingDir;        // "" = the launcher's
    // Additions to the inherited environment; they replace inherited values of the same name.
    std::vector<std::pair<std::string, std::string>> env;
    std::string tracePath;     // POOLSCOPE_OUTPUT
    std::string collectorPath; // libpoolscope_collector.so -> CUDA_INJECTION64_PATH
    bool listen = false;       // POOLSCOPE_LISTEN=1: the target serves a control socket
    std::string controlDir;    // POOLSCOPE_CONTROL_DIR: where it goes ("" = the default)
};

struct LaunchPlan {
    std::string program;
    std::vector<std::string> argv; // argv[0] = program
    std::vector<std::string> env;  // complete "NAME=value" list for exec
    std::string workingDir;
    std::vector<std::string> warnings; // worth showing (e.g. another tool's injection replaced)

    // One line for a console pane: the variables PoolScope set, then the quoted command.
    std::string displayCommand() const;
};

// Builds the plan over baseEnv ("NAME=value" entries, usually currentEnvironment()). Errors
// (InvalidArgument, in plain words): no program, no collector, no trace path, bad variable name.
Result<LaunchPlan> buildLaunchPlan(const LaunchSpec& spec, const std::vector<std::string>& baseEnv);

std::vector<std::string> currentEnvironment();

// Shell-style quoting for display ("a b" -> 'a b').
std::string shellQuote(const std::string& s);

} // namespace poolscope::control

#include "poolscope/control/LaunchSpec.h"

#include "poolscope/control/Discovery.h"

#include <algorithm>
#include <cctype>
#include <string_view>

extern char** environ;

namespace poolscope::control {

namespace {

std::string nameOf(const std::string& entry) {
    auto eq = entry.find('=');
    return eq == std::string::npos ? entry : entry.substr(0, eq);
}

bool validName(const std::string& n) {
    if (n.empty() || (n[0] >= '0' && n[0] <= '9')) return false;
    return std::all_of(n.begin(), n.end(), [](char c) {
        return c == '_' || (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
               (c >= '0' && c <= '9');
    });
}

// Variables whose inherited values must not leak into a launch that did not ask for them
// (a shell that exported POOLSCOPE_LISTEN=1 once should not make every launch listen).
bool managed(const std::string& n) {
    return n == kEnvInjection || n == kEnvOutput || n == kEnvListen || n == kEnvControlDir;
}

void setVar(std::vector<std::string>& env, const std::string& name, const std::string& value) {
    env.erase(std::remove_if(env.begin(), env.end(),
                             [&](const std::string& e) { return nameOf(e) == name; }),
              env.end());
    env.push_back(name + "=" + value);
}

} // namespace

std::vector<std::string> currentEnvironment() {
    std::vector<std::string> out;
    for (char** e = environ; e && *e; ++e)
        out.emplace_back(*e);
    return out;
}

std::string shellQuote(const std::string& s) {
    if (!s.empty() && std::all_of(s.begin(), s.end(), [](char c) {
            return std::isalnum(static_cast<unsigned char>(c)) ||
                   std::string_view("_-./=:,+@%").find(c) != std::string_view::npos;
        }))
        return s;
    std::string out = "'";
    for (char c : s) {
        if (c == '\'')
            out += "'\\''";
        else
            out += c;
    }
    return out + "'";
}

Result<LaunchPlan> buildLaunchPlan(const LaunchSpec& spec,
                                   const std::vector<std::string>& baseEnv) {
    if (spec.program.empty()) return Error{ErrorCode::InvalidArgument, "no program to launch"};
    if (spec.collectorPath.empty())
        return Error{ErrorCode::InvalidArgument,
                     "the collector library (libpoolscope_collector.so) was not found; this build "
                     "cannot record (it needs the CUDA Toolkit)"};
    if (spec.tracePath.empty()) return Error{ErrorCode::InvalidArgument, "no trace path given"};
    LaunchPlan plan;
    plan.program = spec.program;
    plan.argv.push_back(spec.program);
    plan.argv.insert(plan.argv.end(), spec.args.begin(), spec.args.end());
    plan.workingDir = spec.workingDir;

    for (const auto& e : baseEnv) {
        const std::string n = nameOf(e);
        if (n == kEnvInjection && e.substr(n.size() + 1) != spec.collectorPath)
            plan.warnings.push_back(
                "replacing the inherited " + e +
                " (another tool's injection): only one CUPTI subscriber can exist per process");
        if (!managed(n)) plan.env.push_back(e);
    }
    for (const auto& [name, value] : spec.env) {
        if (!validName(name))
            return Error{ErrorCode::InvalidArgument,
                         "invalid environment variable name '" + name + "'"};
        if (managed(name)) {
            plan.warnings.push_back(name + " is set by PoolScope for this launch; the value '" +
                                    value + "' from the environment additions is ignored");
            continue;
        }
        setVar(plan.env, name, value);
    }
    setVar(plan.env, kEnvInjection, spec.collectorPath);
    setVar(plan.env, kEnvOutput, spec.tracePath);
    if (spec.listen) {
        setVar(plan.env, kEnvListen, "1");
        if (!spec.controlDir.empty()) setVar(plan.env, kEnvControlDir, spec.controlDir);
    }
    return plan;
}

std::string LaunchPlan::displayCommand() const {
    std::string out;
    for (const auto& e : env) {
        const std::string n = nameOf(e);
        if (!managed(n)) continue;
        out += n + "=" + shellQuote(e.substr(n.size() + 1)) + " ";
    }
    for (size_t i = 0; i < argv.size(); ++i)
        out += (i ? " " : "") + shellQuote(argv[i]);
    return out;
}

} // namespace poolscope::control

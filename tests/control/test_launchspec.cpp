// The launcher's argv/environment builder, and the one launch contract: `poolscope record` and
// the GUI's Live > Launch give a program the same environment.
#include "poolscope/control/Discovery.h"
#include "poolscope/control/LaunchSpec.h"

#include <algorithm>
#include <cstdlib>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <set>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

using namespace poolscope;
using namespace poolscope::control;

namespace {

LaunchSpec basic() {
    LaunchSpec s;
    s.program = "/usr/bin/python3";
    s.args = {"train.py", "--epochs", "3"};
    s.workingDir = "/home/u/proj";
    s.tracePath = "/tmp/run.poolscope";
    s.collectorPath = "/opt/poolscope/lib/libpoolscope_collector.so";
    return s;
}

int count(const std::vector<std::string>& env, const std::string& name) {
    return int(std::count_if(env.begin(), env.end(),
                             [&](const std::string& e) { return e.rfind(name + "=", 0) == 0; }));
}

bool has(const std::vector<std::string>& env, const std::string& entry) {
    return std::find(env.begin(), env.end(), entry) != env.end();
}

std::vector<std::string> strings(char* const* list) {
    std::vector<std::string> out;
    for (; *list; ++list)
        out.emplace_back(*list);
    return out;
}

std::string valueOf(const std::vector<std::string>& env, const std::string& name) {
    for (const auto& e : env)
        if (e.rfind(name + "=", 0) == 0) return e.substr(name.size() + 1);
    return {};
}

// Runs argv (no shell) with the test's own environment, or with `exec` when given; returns
// stdout and the child's pid.
std::string runCaptured(std::vector<std::string> argv, ChildExec* exec, pid_t* pidOut) {
    int p[2];
    if (pipe2(p, O_CLOEXEC) != 0) return {};
    std::vector<char*> cargv;
    for (auto& a : argv)
        cargv.push_back(a.data());
    cargv.push_back(nullptr);
    pid_t pid = fork();
    if (pid == 0) { // only async-signal-safe calls until exec
        dup2(p[1], 1);
        int devnull = open("/dev/null", O_WRONLY);
        if (devnull >= 0) dup2(devnull, 2);
        if (exec)
            exec->exec();
        else
            execve(cargv[0], cargv.data(), environ);
        _exit(121);
    }
    close(p[1]);
    std::string out;
    char buf[4096];
    ssize_t n;
    while ((n = read(p[0], buf, sizeof buf)) > 0)
        out.append(buf, size_t(n));
    close(p[0]);
    int status = 0;
    waitpid(pid, &status, 0);
    if (pidOut) *pidOut = pid;
    return out;
}

// `env -0` output: one entry per NUL (values may hold newlines).
std::vector<std::string> splitNul(const std::string& s) {
    std::vector<std::string> out;
    size_t start = 0;
    for (size_t i = 0; i < s.size(); ++i)
        if (s[i] == '\0') {
            out.push_back(s.substr(start, i - start));
            start = i + 1;
        }
    return out;
}

} // namespace

TEST(LaunchSpec, BuildsArgvAndCollectorEnvironment) {
    auto plan = buildLaunchPlan(basic(), {"PATH=/usr/bin", "HOME=/home/u"});
    ASSERT_TRUE(plan) << plan.error().message;
    EXPECT_EQ(plan->argv,
              (std::vector<std::string>{"/usr/bin/python3", "train.py", "--epochs", "3"}));
    EXPECT_EQ(plan->workingDir, "/home/u/proj");
    EXPECT_TRUE(has(plan->env, "PATH=/usr/bin"));
    EXPECT_TRUE(has(plan->env, "HOME=/home/u"));
    EXPECT_TRUE(
        has(plan->env, "CUDA_INJECTION64_PATH=/opt/poolscope/lib/libpoolscope_collector.so"));
    EXPECT_TRUE(has(plan->env, "POOLSCOPE_OUTPUT=/tmp/run.poolscope"));
    EXPECT_TRUE(has(plan->env, "POOLSCOPE_SAMPLE_PERIOD_MS=1"));
    EXPECT_EQ(count(plan->env, "POOLSCOPE_LISTEN"), 0);
    EXPECT_EQ(count(plan->env, kEnvRootPid), 0) << "known only in the child: environmentFor(pid)";
    EXPECT_TRUE(has(plan->environmentFor(77), "POOLSCOPE_ROOT_PID=77"));
    EXPECT_TRUE(plan->warnings.empty());
}

// Call sites (issue #13): --stacks / --stack-depth reach the collector through the environment,
// bad values are refused in words, and NVTX is pointed at CUPTI unless the user chose already.
TEST(LaunchSpec, StacksAndNvtxInjection) {
    LaunchSpec s = basic();
    auto none = buildLaunchPlan(s, {"PATH=/usr/bin"});
    ASSERT_TRUE(none);
    EXPECT_EQ(count(none->env, kEnvStacks), 0) << "unset: the collector's default (auto)";
    EXPECT_EQ(count(none->env, kEnvStackDepth), 0);
    EXPECT_TRUE(has(none->env, std::string(kEnvNvtxInjection) + "=" + s.collectorPath))
        << "NVTX goes to the collector, which forwards to the CUPTI copy it subscribed to";
    s.stacks = "native";
    s.stackDepth = 12;
    s.nvtxInjectionPath = "/opt/cuda/lib64/libcupti.so";
    auto plan = buildLaunchPlan(s, {"PATH=/usr/bin"});
    ASSERT_TRUE(plan) << plan.error().message;
    EXPECT_TRUE(has(plan->env, "POOLSCOPE_STACKS=native"));
    EXPECT_TRUE(has(plan->env, "POOLSCOPE_STACK_DEPTH=12"));
    EXPECT_TRUE(has(plan->env, "NVTX_INJECTION64_PATH=/opt/cuda/lib64/libcupti.so"));
    auto inherited = buildLaunchPlan(s, {"NVTX_INJECTION64_PATH=/mine/libnvtx_tool.so"});
    ASSERT_TRUE(inherited);
    EXPECT_TRUE(has(inherited->env, "NVTX_INJECTION64_PATH=/mine/libnvtx_tool.so"));
    EXPECT_EQ(count(inherited->env, kEnvNvtxInjection), 1);
    EXPECT_EQ(count(plan->env, kEnvStacksAtFree), 0);
    s.stacksAtFree = true;
    auto atFree = buildLaunchPlan(s, {});
    ASSERT_TRUE(atFree) << atFree.error().message;
    EXPECT_TRUE(has(atFree->env, std::string(kEnvStacksAtFree) + "=1"));
    s.stacks = "off";
    auto offAtFree = buildLaunchPlan(s, {});
    ASSERT_FALSE(offAtFree) << "a free site with stacks off is a contradiction";
    EXPECT_NE(offAtFree.error().message.find("--stacks-at-free"), std::string::npos);
    s.stacksAtFree = false;
    s.stacks = "everything";
    auto bad = buildLaunchPlan(s, {});
    ASSERT_FALSE(bad);
    EXPECT_NE(bad.error().message.find("--stacks must be"), std::string::npos);
    s.stacks = "all";
    s.stackDepth = 1000;
    auto deep = buildLaunchPlan(s, {});
    ASSERT_FALSE(deep);
    EXPECT_NE(deep.error().message.find("1 to 256"), std::string::npos);
}

TEST(LaunchSpec, ListenAndControlDir) {
    LaunchSpec s = basic();
    s.listen = true;
    s.controlDir = "/run/user/1000/poolscope-launch";
    auto plan = buildLaunchPlan(s, {});
    ASSERT_TRUE(plan);
    EXPECT_TRUE(has(plan->env, "POOLSCOPE_LISTEN=1"));
    EXPECT_TRUE(has(plan->env, std::string(kEnvControlDir) + "=/run/user/1000/poolscope-launch"));
    s.listenAt = "/tmp/x.sock";
    s.samplePeriodMs = 0.5;
    plan = buildLaunchPlan(s, {});
    ASSERT_TRUE(plan);
    EXPECT_TRUE(has(plan->env, "POOLSCOPE_LISTEN=unix:/tmp/x.sock"));
    EXPECT_TRUE(has(plan->env, "POOLSCOPE_SAMPLE_PERIOD_MS=0.5"));
    s.samplePeriodMs = -1;
    EXPECT_FALSE(buildLaunchPlan(s, {}));
}

// What a launcher execs: the plan's environment plus the launched process's own pid, written
// in the child without allocating.
TEST(LaunchSpec, ChildExecIsThePlanWithTheChildsPid) {
    auto plan = buildLaunchPlan(basic(), {"PATH=/usr/bin", "HOME=/home/u"});
    ASSERT_TRUE(plan);
    ChildExec ex(*plan);
    EXPECT_EQ(strings(ex.argv()), plan->argv);
    ex.setPid(1234567);
    EXPECT_EQ(strings(ex.envp()), plan->environmentFor(1234567));
    ex.setPid(42); // shorter: no digits of the last one left behind
    EXPECT_EQ(strings(ex.envp()), plan->environmentFor(42));
    EXPECT_EQ(valueOf(strings(ex.envp()), kEnvRootPid), "42");
}

TEST(LaunchSpec, ChildExecGivesTheLaunchedProcessItsOwnPid) {
    LaunchSpec s = basic();
    s.program = "/usr/bin/env";
    s.args = {"-0"};
    auto plan = buildLaunchPlan(s, currentEnvironment());
    ASSERT_TRUE(plan);
    ChildExec ex(*plan);
    pid_t pid = 0;
    auto env = splitNul(runCaptured({}, &ex, &pid));
    ASSERT_FALSE(env.empty());
    EXPECT_EQ(valueOf(env, kEnvRootPid), std::to_string(pid));
    const auto want = plan->environmentFor(pid);
    EXPECT_EQ(std::set<std::string>(env.begin(), env.end()),
              std::set<std::string>(want.begin(), want.end()));
}

// The one launch contract: for the same program, trace and collector, `poolscope record` runs
// the program with exactly the environment the GUI's Live > Launch builds (LaunchDialog::spec()
// -> buildLaunchPlan over the current environment -> TargetProcess's ChildExec), including
// POOLSCOPE_ROOT_PID = the program's own pid.
TEST(LaunchSpec, RecordAndGuiLaunchTheSameEnvironment) {
#ifndef POOLSCOPE_CLI_PATH
    GTEST_SKIP() << "the poolscope CLI is not built";
#else
    char tmpl[] = "/tmp/pscp-launch-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    const std::string dir = tmpl;
    const std::string collector = dir + "/libpoolscope_collector.so"; // /usr/bin/env never loads it
    FILE* f = fopen(collector.c_str(), "w");
    ASSERT_NE(f, nullptr);
    fclose(f);
    const std::string trace = dir + "/run.poolscope";
    // Variables record must not pass on as they are, and one it must.
    setenv(kEnvRootPid, "1", 1);
    setenv(kEnvOutput, "/elsewhere.poolscope", 1);
    setenv(kEnvDebug, "0", 1);

    pid_t recordPid = 0;
    auto recorded = splitNul(runCaptured({POOLSCOPE_CLI_PATH, "record", "-q", "-o", trace,
                                          "--collector", collector, "--", "/usr/bin/env", "-0"},
                                         nullptr, &recordPid));
    ASSERT_FALSE(recorded.empty());
    const std::string rootPid = valueOf(recorded, kEnvRootPid);
    ASSERT_FALSE(rootPid.empty()) << "record sets POOLSCOPE_ROOT_PID";
    EXPECT_NE(rootPid, "1");
    EXPECT_NE(rootPid, std::to_string(recordPid)) << "the program's pid, not record's";

    LaunchSpec gui; // as LaunchDialog::spec() fills it
    gui.program = "/usr/bin/env";
    gui.args = {"-0"};
    gui.tracePath = trace;
    gui.collectorPath = collector;
    auto plan = buildLaunchPlan(gui, currentEnvironment());
    ASSERT_TRUE(plan) << plan.error().message;
    auto expected = plan->environmentFor(std::stoll(rootPid));
    EXPECT_EQ(std::set<std::string>(recorded.begin(), recorded.end()),
              std::set<std::string>(expected.begin(), expected.end()));
    EXPECT_EQ(valueOf(recorded, kEnvOutput), trace);
    EXPECT_EQ(valueOf(recorded, kEnvInjection), collector);
    EXPECT_EQ(valueOf(recorded, kEnvDebug), "0");

    unsetenv(kEnvRootPid);
    unsetenv(kEnvOutput);
    unsetenv(kEnvDebug);
    std::string cmd = "rm -rf '" + dir + "'";
    [[maybe_unused]] int r = std::system(cmd.c_str());
#endif
}

TEST(LaunchSpec, InheritedCollectorVariablesDoNotLeak) {
    auto plan = buildLaunchPlan(basic(), {"POOLSCOPE_LISTEN=1", "POOLSCOPE_OUTPUT=/old.poolscope",
                                          "POOLSCOPE_CONTROL_DIR=/x", "POOLSCOPE_ROOT_PID=99",
                                          "POOLSCOPE_SAMPLE_PERIOD_MS=7", "POOLSCOPE_DEBUG=1",
                                          "CUDA_INJECTION64_PATH=/opt/nsys/libinj.so", "A=1"});
    ASSERT_TRUE(plan);
    EXPECT_EQ(count(plan->env, "POOLSCOPE_LISTEN"), 0);
    EXPECT_EQ(count(plan->env, "POOLSCOPE_ROOT_PID"), 0);
    EXPECT_EQ(count(plan->environmentFor(5), "POOLSCOPE_ROOT_PID"), 1);
    EXPECT_TRUE(has(plan->env, "POOLSCOPE_SAMPLE_PERIOD_MS=1"));
    EXPECT_EQ(count(plan->env, "POOLSCOPE_SAMPLE_PERIOD_MS"), 1);
    EXPECT_TRUE(has(plan->env, "POOLSCOPE_DEBUG=1")) << "tuning variables pass through";
    EXPECT_EQ(count(plan->env, "POOLSCOPE_CONTROL_DIR"), 0);
    EXPECT_EQ(count(plan->env, "POOLSCOPE_OUTPUT"), 1);
    EXPECT_TRUE(has(plan->env, "POOLSCOPE_OUTPUT=/tmp/run.poolscope"));
    EXPECT_EQ(count(plan->env, "CUDA_INJECTION64_PATH"), 1);
    ASSERT_EQ(plan->warnings.size(), 1u);
    EXPECT_NE(plan->warnings[0].find("only one CUPTI subscriber"), std::string::npos);
    EXPECT_TRUE(has(plan->env, "A=1"));
}

TEST(LaunchSpec, AdditionsReplaceInheritedValuesButNotOurs) {
    LaunchSpec s = basic();
    s.env = {{"PYTORCH_CUDA_ALLOC_CONF", "backend:cudaMallocAsync"},
             {"HOME", "/elsewhere"},
             {"POOLSCOPE_OUTPUT", "/sneaky.poolscope"},
             {"EMPTY", ""}};
    auto plan =
        buildLaunchPlan(s, {"HOME=/home/u", "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True"});
    ASSERT_TRUE(plan);
    EXPECT_TRUE(has(plan->env, "PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync"));
    EXPECT_EQ(count(plan->env, "PYTORCH_CUDA_ALLOC_CONF"), 1);
    EXPECT_TRUE(has(plan->env, "HOME=/elsewhere"));
    EXPECT_EQ(count(plan->env, "HOME"), 1);
    EXPECT_TRUE(has(plan->env, "EMPTY="));
    EXPECT_TRUE(has(plan->env, "POOLSCOPE_OUTPUT=/tmp/run.poolscope"));
    ASSERT_EQ(plan->warnings.size(), 1u);
    EXPECT_NE(plan->warnings[0].find("POOLSCOPE_OUTPUT"), std::string::npos);
}

TEST(LaunchSpec, RefusesIncompleteSpecs) {
    LaunchSpec s = basic();
    s.program.clear();
    EXPECT_EQ(buildLaunchPlan(s, {}).error().code, ErrorCode::InvalidArgument);
    s = basic();
    s.collectorPath.clear();
    auto e = buildLaunchPlan(s, {});
    ASSERT_FALSE(e);
    EXPECT_NE(e.error().message.find("collector"), std::string::npos);
    s = basic();
    s.tracePath.clear();
    EXPECT_FALSE(buildLaunchPlan(s, {}));
    s = basic();
    s.env = {{"BAD NAME", "x"}};
    EXPECT_FALSE(buildLaunchPlan(s, {}));
    s.env = {{"A=B", "x"}};
    EXPECT_FALSE(buildLaunchPlan(s, {}));
}

TEST(LaunchSpec, DisplayCommandQuotes) {
    LaunchSpec s = basic();
    s.args = {"my script.py", "it's"};
    s.listen = true;
    auto plan = buildLaunchPlan(s, {"PATH=/usr/bin"});
    ASSERT_TRUE(plan);
    std::string d = plan->displayCommand();
    EXPECT_NE(d.find("POOLSCOPE_LISTEN=1"), std::string::npos);
    EXPECT_NE(d.find("'my script.py'"), std::string::npos);
    EXPECT_NE(d.find("'it'\\''s'"), std::string::npos);
    EXPECT_EQ(d.find("PATH=/usr/bin"), std::string::npos) << "only PoolScope's variables are shown";
}

TEST(Discovery, DefaultDirFollowsEnvironment) {
    const char* oldXdg = getenv("XDG_RUNTIME_DIR");
    std::string saved = oldXdg ? oldXdg : "";
    unsetenv(kEnvControlDir);
    setenv("XDG_RUNTIME_DIR", "/run/user/1234", 1);
    EXPECT_EQ(defaultControlDir(), "/run/user/1234/poolscope");
    unsetenv("XDG_RUNTIME_DIR");
    EXPECT_EQ(defaultControlDir(), "/tmp/poolscope-" + std::to_string(getuid()));
    setenv(kEnvControlDir, "/tmp/mine", 1);
    EXPECT_EQ(defaultControlDir(), "/tmp/mine");
    unsetenv(kEnvControlDir);
    if (oldXdg) setenv("XDG_RUNTIME_DIR", saved.c_str(), 1);
}

TEST(Discovery, EnsurePrivateDirRefusesUnsafePlaces) {
    char tmpl[] = "/tmp/pscp-dir-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    std::string d = tmpl;
    std::string sub = d + "/ctl";
    ASSERT_TRUE(ensurePrivateDir(sub));
    struct stat st {};
    ASSERT_EQ(stat(sub.c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 0777, 0700u);
    chmod(sub.c_str(), 0755); // too open: tightened
    ASSERT_TRUE(ensurePrivateDir(sub));
    stat(sub.c_str(), &st);
    EXPECT_EQ(st.st_mode & 0777, 0700u);
    std::string link = d + "/link";
    ASSERT_EQ(symlink(sub.c_str(), link.c_str()), 0);
    EXPECT_FALSE(ensurePrivateDir(link)) << "a symlink is never followed";
    std::string file = d + "/file";
    FILE* f = fopen(file.c_str(), "w");
    fclose(f);
    EXPECT_FALSE(ensurePrivateDir(file));
    std::string cmd = "rm -rf '" + d + "'";
    [[maybe_unused]] int r = system(cmd.c_str());
}

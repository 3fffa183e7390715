// The launcher's argv/environment builder.
#include "poolscope/control/Discovery.h"
#include "poolscope/control/LaunchSpec.h"

#include <algorithm>
#include <gtest/gtest.h>
#include <sys/stat.h>
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
    EXPECT_EQ(count(plan->env, "POOLSCOPE_LISTEN"), 0);
    EXPECT_TRUE(plan->warnings.empty());
}

TEST(LaunchSpec, ListenAndControlDir) {
    LaunchSpec s = basic();
    s.listen = true;
    s.controlDir = "/run/user/1000/poolscope-launch";
    auto plan = buildLaunchPlan(s, {});
    ASSERT_TRUE(plan);
    EXPECT_TRUE(has(plan->env, "POOLSCOPE_LISTEN=1"));
    EXPECT_TRUE(has(plan->env, std::string(kEnvControlDir) + "=/run/user/1000/poolscope-launch"));
}

TEST(LaunchSpec, InheritedCollectorVariablesDoNotLeak) {
    auto plan = buildLaunchPlan(basic(), {"POOLSCOPE_LISTEN=1", "POOLSCOPE_OUTPUT=/old.poolscope",
                                          "POOLSCOPE_CONTROL_DIR=/x",
                                          "CUDA_INJECTION64_PATH=/opt/nsys/libinj.so", "A=1"});
    ASSERT_TRUE(plan);
    EXPECT_EQ(count(plan->env, "POOLSCOPE_LISTEN"), 0);
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

// poolscope: the command-line front door. Verbs (info, report, record, ctl) are Qt-free so they
// build and run on headless GPU servers. With no verb, or a trace file, it starts the desktop
// window, a sibling executable (poolscope-gui) that only exists where Qt was available.

#include <CLI/CLI.hpp>
#include <climits>
#include <cstdio>
#include <cstring>
#include <string>
#include <unistd.h>
#include <vector>

#include "Commands.h"

namespace poolscope::cli {

const char* selfDir() {
    static std::string dir = [] {
        char buf[PATH_MAX];
        ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
        if (n <= 0) return std::string(".");
        std::string p(buf, static_cast<size_t>(n));
        auto slash = p.rfind('/');
        return slash == std::string::npos ? std::string(".") : p.substr(0, slash);
    }();
    return dir.c_str();
}

} // namespace poolscope::cli

namespace {

bool isVerb(const char* a) {
    static const char* kVerbs[] = {"info", "report", "record", "ctl", "dump", "whatif", "advise", "export", "diff", "import", "merge", "help"};
    for (const char* v : kVerbs)
        if (std::strcmp(a, v) == 0) return true;
    return false;
}

// Replaces this process with the GUI, passing the remaining arguments through.
int execGui(int argc, char** argv, int firstArg) {
    std::string gui = std::string(poolscope::cli::selfDir()) + "/poolscope-gui";
    if (access(gui.c_str(), X_OK) != 0) {
        std::fprintf(stderr,
                     "poolscope: the desktop window is not part of this build (it was built "
                     "without Qt 6).\nUse 'poolscope info TRACE' or 'poolscope report TRACE' here, "
                     "or open the trace on a desktop.\n");
        return 2;
    }
    std::vector<char*> args;
    args.push_back(const_cast<char*>(gui.c_str()));
    for (int i = firstArg; i < argc; ++i) args.push_back(argv[i]);
    args.push_back(nullptr);
    execv(gui.c_str(), args.data());
    std::perror("poolscope: could not start poolscope-gui");
    return 2;
}

} // namespace

int main(int argc, char** argv) {
    // `poolscope`, `poolscope TRACE`, `poolscope open TRACE`: the window.
    if (argc == 1) return execGui(argc, argv, 1);
    if (std::strcmp(argv[1], "open") == 0) return execGui(argc, argv, 2);
    if (argv[1][0] != '-' && !isVerb(argv[1])) return execGui(argc, argv, 1);

    CLI::App app{"PoolScope: visual memory profiler for CUDA's stream-ordered allocator.\n"
                 "Run with no verb, or with a .poolscope file, to open the desktop window."};
    app.set_version_flag("--version", std::string("poolscope ") + POOLSCOPE_VERSION);
    app.require_subcommand(1);
    int exitCode = 0;
    poolscope::cli::registerInfo(app, exitCode);
    poolscope::cli::registerReport(app, exitCode);
    poolscope::cli::registerRecord(app, exitCode);
    poolscope::cli::registerCtl(app, exitCode);
    poolscope::cli::registerDump(app, exitCode);
    poolscope::cli::registerWhatif(app, exitCode);
    poolscope::cli::registerAdvise(app, exitCode);
    poolscope::cli::registerExport(app, exitCode);
    poolscope::cli::registerDiff(app, exitCode);
    poolscope::cli::registerImport(app, exitCode);
    poolscope::cli::registerMerge(app, exitCode);
    try {
        app.parse(argc, argv);
    } catch (const CLI::ParseError& e) {
        if (int rc = poolscope::cli::explainCtlParseError(app, e); rc >= 0) return rc;
        return app.exit(e);
    }
    return exitCode;
}

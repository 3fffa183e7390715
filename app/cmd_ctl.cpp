// Placeholder until the control work lands: registers the verb so the CLI's shape is fixed.
#include <CLI/CLI.hpp>
#include <cstdio>

#include "Commands.h"

namespace poolscope::cli {

void registerCtl(CLI::App& app, int& exitCode) {
    auto* sub = app.add_subcommand("ctl", "(not built yet)");
    sub->allow_extras();
    sub->callback([&exitCode] {
        std::fprintf(stderr, "poolscope ctl: not implemented in this build\n");
        exitCode = 2;
    });
}

} // namespace poolscope::cli

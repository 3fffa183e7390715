// Placeholder until the timeline work lands: registers the verb so the CLI's shape is fixed.
#include <CLI/CLI.hpp>
#include <cstdio>

#include "Commands.h"

namespace poolscope::cli {

void registerReport(CLI::App& app, int& exitCode) {
    auto* sub = app.add_subcommand("report", "(not built yet)");
    sub->allow_extras();
    sub->callback([&exitCode] {
        std::fprintf(stderr, "poolscope report: not implemented in this build\n");
        exitCode = 2;
    });
}

} // namespace poolscope::cli

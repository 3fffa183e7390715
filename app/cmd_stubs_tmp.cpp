#include <CLI/CLI.hpp>
#include "Commands.h"
namespace poolscope::cli {
void registerDiff(CLI::App&, int&) {}
void registerImport(CLI::App&, int&) {}
void registerMerge(CLI::App&, int&) {}
}

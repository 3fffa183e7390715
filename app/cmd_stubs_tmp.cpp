#include <CLI/CLI.hpp>
#include "Commands.h"
namespace poolscope::cli {
void registerMerge(CLI::App&, int&) {}
}

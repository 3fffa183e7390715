#pragma once
// Each CLI verb lives in its own cmd_*.cpp and registers itself on the CLI11 app. A verb's
// callback stores its process exit code in `exitCode`.

namespace CLI {
class App;
class ParseError;
} // namespace CLI

namespace poolscope::cli {

void registerInfo(CLI::App& app, int& exitCode);
void registerReport(CLI::App& app, int& exitCode);
void registerRecord(CLI::App& app, int& exitCode);
void registerCtl(CLI::App& app, int& exitCode);
void registerDump(CLI::App& app, int& exitCode);
void registerWhatif(CLI::App& app, int& exitCode);
void registerAdvise(CLI::App& app, int& exitCode);
void registerExport(CLI::App& app, int& exitCode);
void registerDiff(CLI::App& app, int& exitCode);
void registerImport(CLI::App& app, int& exitCode);
void registerMerge(CLI::App& app, int& exitCode);

// A clearer message than CLI11's for a ctl command line without a known verb: prints it and
// returns the exit code, or -1 when e is about something else.
int explainCtlParseError(CLI::App& app, const CLI::ParseError& e);

// Path of the directory holding the running executable (for sibling tools and the collector).
const char* selfDir();

} // namespace poolscope::cli

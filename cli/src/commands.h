// Every `pipetune` subcommand registers itself on the CLI11 app and, when it
// runs, stores its exit code: 0 success, 1 a check failed, 2 bad usage or
// bad input (workflow/exit_code.h).
#pragma once

#include <CLI/CLI.hpp>

namespace pipetune::cli {

void RegisterRunCommand(CLI::App& app, int& exit_code);
void RegisterProfileCommand(CLI::App& app, int& exit_code);
void RegisterExportCommand(CLI::App& app, int& exit_code);
void RegisterTraceInfoCommand(CLI::App& app, int& exit_code);
void RegisterTuneCommand(CLI::App& app, int& exit_code);
void RegisterReportCommand(CLI::App& app, int& exit_code);
void RegisterBaselineCommand(CLI::App& app, int& exit_code);
void RegisterCheckCommand(CLI::App& app, int& exit_code);
void RegisterAutotuneJobCommand(CLI::App& app, int& exit_code);

// Builds the whole command line and runs it; what main() calls. Output goes
// to stdout/stderr. Returns the process exit code.
int Main(int argc, char** argv);

}  // namespace pipetune::cli

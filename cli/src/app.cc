#include <fmt/format.h>

#include "cli_common.h"
#include "commands.h"

namespace pipetune::cli {

int Main(int argc, char** argv) {
  CLI::App app{
      "pipetune: find and remove the bottleneck of a machine-learning input pipeline.\n"
      "Exit codes: 0 success, 1 a check failed, 2 bad usage or bad input."};
  app.require_subcommand(1);
  app.set_version_flag("--version", "pipetune 0.1.0");
  int exit_code = kExitOk;
  RegisterRunCommand(app, exit_code);
  RegisterProfileCommand(app, exit_code);
  RegisterReportCommand(app, exit_code);
  RegisterTuneCommand(app, exit_code);
  RegisterBaselineCommand(app, exit_code);
  RegisterCheckCommand(app, exit_code);
  RegisterAutotuneJobCommand(app, exit_code);
  RegisterExportCommand(app, exit_code);
  RegisterTraceInfoCommand(app, exit_code);
  if (argc <= 1) {  // a bare `pipetune`: show what it can do
    fmt::print(stderr, "{}", app.help());
    return kExitBadInput;
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // --help and --version are "errors" that exit 0; every real one is usage.
    int code = app.exit(e);
    return code == 0 ? kExitOk : kExitBadInput;
  }
  return exit_code;
}

}  // namespace pipetune::cli

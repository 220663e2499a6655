// `pipetune trace-info TRACE`: what a trace holds, in a few lines, including
// how much of it was lost if the run was killed.
#include <fmt/format.h>

#include <memory>
#include <string>

#include "cli_common.h"
#include "commands.h"
#include "pipetune/tracer/reader.h"

namespace pipetune::cli {

void RegisterTraceInfoCommand(CLI::App& app, int& exit_code) {
  auto trace_path = std::make_shared<std::string>();
  CLI::App* sub =
      app.add_subcommand("trace-info", "Say what is in a trace: stages, counts, drops, truncation");
  sub->add_option("trace", *trace_path, "Trace file written by pipetune run or profile")->required();
  sub->callback([trace_path, &exit_code] {
    StatusOr<std::string> text = tracer::DescribeTrace(*trace_path);
    if (!text.ok()) {
      exit_code = ReportError(text.status());
      return;
    }
    fmt::print("{}", *text);
    exit_code = kExitOk;
  });
}

}  // namespace pipetune::cli

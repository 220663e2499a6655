// `pipetune report TRACE... [--format text|json|markdown|html] [-o FILE]
//  [--what-if QUESTION]...`: the diagnosis of a traced run. The first trace is
// diagnosed; further traces of the same pipeline (other parallelism levels)
// only feed the scaling fit. What-if questions are answered by the same model
// (docs/analyzer.md).
#include <fmt/format.h>

#include <memory>
#include <string>
#include <vector>

#include "cli_common.h"
#include "commands.h"
#include "pipetune/analyzer/report.h"
#include "pipetune/workflow/report.h"

namespace pipetune::cli {
namespace {

struct ReportFlags {
  std::vector<std::string> traces;
  std::string format = "text";
  std::string output;
  std::vector<std::string> what_ifs;
};

int Report(const ReportFlags& flags) {
  StatusOr<analyzer::ReportFormat> format = analyzer::ParseReportFormat(flags.format);
  if (!format.ok()) return ReportError(format.status());
  workflow::ReportRequest request{flags.traces, *format, flags.what_ifs, flags.output};
  StatusOr<workflow::ReportResult> result = workflow::Report(request);
  if (!result.ok()) return ReportError(result.status());
  if (!result->written) fmt::print("{}", result->text);
  // The truncation warning is in every report; say it on stderr too, where
  // a script that only keeps the JSON still shows it to a person.
  if (!result->diagnosis.truncation_warning.empty()) {
    fmt::print(stderr, "pipetune: warning: {}\n", result->diagnosis.truncation_warning);
  }
  return kExitOk;
}

}  // namespace

void RegisterReportCommand(CLI::App& app, int& exit_code) {
  auto flags = std::make_shared<ReportFlags>();
  CLI::App* sub = app.add_subcommand(
      "report", "Diagnose a traced run: what limits throughput, is the consumer waiting, what would help");
  sub->add_option(
         "trace", flags->traces,
         "Trace file(s) of one pipeline; the first is diagnosed, the others (other parallelism levels) "
         "feed the scaling fit")
      ->required();
  sub->add_option("--format,-f", flags->format, "text (default), json, markdown or html")
      ->check(CLI::IsMember({"text", "json", "markdown", "md", "html"}));
  sub->add_option("-o,--output", flags->output, "Write the report to this file instead of stdout");
  sub->add_option(
         "--what-if", flags->what_ifs,
         "Ask the model: cores=N, cores=+N, STAGE.parallelism=N, cache=STAGE, cache=none; for a DataLoader "
         "num_workers=N, prefetch_factor=N, fetch_threads=N, persistent_workers=BOOL, pin_memory=BOOL; "
         "combine with commas; "
         "repeatable")
      ->allow_extra_args(false);  // one question per --what-if, so traces may follow
  sub->callback([flags, &exit_code] { exit_code = Report(*flags); });
}

}  // namespace pipetune::cli

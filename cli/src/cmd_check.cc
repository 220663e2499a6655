// `pipetune check CONFIG --baseline BASE.json` (or `--baseline BASE.json
// TRACE...`, or `--baseline BASE.json -- python3 train.py ARGS`): the CI gate
// (pipetune/workflow/check.h). Exit 0 pass (or machine drift), 1 regression,
// 2 bad input or a program that failed.
#include <fmt/format.h>

#include <memory>
#include <string>
#include <vector>

#include "cli_common.h"
#include "commands.h"
#include "pipetune/base/files.h"
#include "pipetune/base/json.h"
#include "pipetune/models/config.h"
#include "pipetune/workflow/check.h"

namespace pipetune::cli {
namespace {

struct CheckFlags {
  std::vector<std::string> inputs;
  std::string baseline;
  int runs = 5;
  double seconds = 2;
  double tolerance_percent = 10;
  std::string format = "text";
  std::string junit;
  std::string markdown;
  bool strict_machine = false;
};

int RunCheck(const CheckFlags& flags) {
  workflow::CheckRequest request;
  request.baseline_path = flags.baseline;
  workflow::SetGateInputs(flags.inputs, request);
  request.runs = flags.runs;
  request.seconds = flags.seconds;
  request.judge.tolerance = flags.tolerance_percent / 100;
  request.strict_machine = flags.strict_machine;
  StatusOr<workflow::CheckReport> report = workflow::Check(request);
  if (!report.ok()) return ReportError(report.status());
  if (!flags.junit.empty()) {
    Status written = WriteFileAtomically(flags.junit, workflow::FormatCheckJunit(*report));
    if (!written.ok()) return ReportError(written);
  }
  if (!flags.markdown.empty()) {
    Status written = WriteFileAtomically(flags.markdown, workflow::FormatCheckMarkdown(*report));
    if (!written.ok()) return ReportError(written);
  }
  if (flags.format == "json") {
    fmt::print("{}\n", DumpJson(workflow::CheckReportToJson(*report), 2));
  } else if (flags.format == "markdown") {
    fmt::print("{}", workflow::FormatCheckMarkdown(*report));
  } else {
    fmt::print("{}", workflow::FormatCheckText(*report));
  }
  return workflow::ExitCodeFor(workflow::OutcomeOf(*report, flags.strict_machine));
}

}  // namespace

void RegisterCheckCommand(CLI::App& app, int& exit_code) {
  auto flags = std::make_shared<CheckFlags>();
  CLI::App* sub = app.add_subcommand(
      "check",
      "CI gate: compare a pipeline (a config or -- python3 train.py run now, or traces) with its baseline; "
      "exit 1 on a regression, naming the stage");
  sub->add_option("input", flags->inputs,
                  "A pipeline config (*.json) to run, traces of its runs, or after -- a program");
  // Both are checked in the callback, the input first: CLI11 would say only
  // "input is required".
  sub->add_option("--baseline", flags->baseline, "Baseline written by `pipetune baseline` (required)");
  sub->add_option("--runs", flags->runs,
                  "Runs of the config or program (default 5; 0: judge a config's knobs alone, no runs)")
      ->check(NonNegative("runs", /*whole=*/true));
  sub->add_option("--seconds", flags->seconds, "Seconds per run (default 2)")->check(Positive("seconds"));
  sub->add_option("--tolerance", flags->tolerance_percent,
                  "Smallest change that matters, in percent (default 10)")
      ->check(Number({.what = "percent", .min = 0, .max = 99}));
  sub->add_option("--format", flags->format, "Report on stdout: text, json or markdown")
      ->check(CLI::IsMember({"text", "json", "markdown"}));
  sub->add_option("--junit", flags->junit,
                  "Also write JUnit XML here (a test case per stage, throughput, config)");
  sub->add_option("--markdown", flags->markdown, "Also write the Markdown report here (a CI job summary)");
  sub->add_flag("--strict-machine", flags->strict_machine,
                "Fail also when every stage slowed by one factor (machine drift)");
  sub->callback([flags, &exit_code] {
    if (flags->inputs.empty()) {
      exit_code = ReportError(MissingInput("check", "a pipeline config, traces of its runs, or -- PROGRAM",
                                           "pipetune check pipeline.json --baseline baseline.json"));
    } else if (flags->baseline.empty()) {
      exit_code = ReportError(InvalidInput(
          "check: --baseline is required: the file `pipetune baseline` wrote, e.g. pipetune check " +
          flags->inputs[0] + " --baseline baseline.json"));
    } else {
      exit_code = RunCheck(*flags);
    }
  });
}

}  // namespace pipetune::cli

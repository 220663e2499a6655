// `pipetune baseline CONFIG -o BASE.json` (or TRACE... -o BASE.json, or
// -o BASE.json -- python3 train.py ARGS for a PyTorch DataLoader): record
// what a pipeline costs, to commit beside it for `pipetune check`.
#include <fmt/format.h>

#include <memory>
#include <string>
#include <vector>

#include "cli_common.h"
#include "commands.h"
#include "pipetune/workflow/baseline.h"

namespace pipetune::cli {
namespace {

struct BaselineFlags {
  std::vector<std::string> inputs;
  std::string output;
  int runs = 5;
  double seconds = 2;
  std::string trace_dir;
};

int RunBaseline(const BaselineFlags& flags) {
  workflow::BaselineRequest request;
  request.runs = flags.runs;
  request.seconds = flags.seconds;
  request.trace_dir = flags.trace_dir;
  workflow::SetGateInputs(flags.inputs, request);
  StatusOr<workflow::Baseline> baseline = workflow::RecordBaseline(request);
  if (!baseline.ok()) return ReportError(baseline.status());
  Status saved = workflow::SaveBaseline(*baseline, flags.output);
  if (!saved.ok()) return ReportError(saved);
  fmt::print("baseline of {} ({} runs) written to {}\n", baseline->pipeline, baseline->runs.size(),
             flags.output);
  return kExitOk;
}

}  // namespace

void RegisterBaselineCommand(CLI::App& app, int& exit_code) {
  auto flags = std::make_shared<BaselineFlags>();
  CLI::App* sub = app.add_subcommand(
      "baseline",
      "Run a pipeline config or a Python program (-- python3 train.py) N times traced, or read traces, and "
      "write the baseline `check` compares to");
  sub->add_option("input", flags->inputs,
                  "A pipeline config (*.json), traces of its runs, or after -- a program whose DataLoader "
                  "is profiled");
  // Both are checked in the callback, the input first: CLI11 would say only
  // "input is required".
  sub->add_option("-o,--output", flags->output,
                  "Baseline file to write (JSON, written atomically; required)");
  sub->add_option("--runs", flags->runs, "Runs of the config or program (default 5)")
      ->check(Positive("runs", /*whole=*/true));
  sub->add_option("--seconds", flags->seconds, "Seconds per run of a config (default 2)")
      ->check(Positive("seconds"));
  sub->add_option("--trace-dir", flags->trace_dir, "Keep the runs' traces in this directory");
  sub->callback([flags, &exit_code] {
    if (flags->inputs.empty()) {
      exit_code = ReportError(MissingInput("baseline", "a pipeline config, traces of its runs, or -- PROGRAM",
                                           "pipetune baseline pipeline.json -o baseline.json"));
    } else if (flags->output.empty()) {
      exit_code =
          ReportError(InvalidInput("baseline: -o is required: the baseline file to write, e.g. "
                                   "pipetune baseline " +
                                   flags->inputs[0] + " -o baseline.json"));
    } else {
      exit_code = RunBaseline(*flags);
    }
  });
}

}  // namespace pipetune::cli

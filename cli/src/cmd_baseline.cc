// `pipetune baseline CONFIG -o BASE.json` (or TRACE... -o BASE.json): record
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

// Configs are JSON files; anything else given is a trace (`run.trace`).
bool IsConfig(const std::string& path) {
  return path.size() >= 5 && path.compare(path.size() - 5, 5, ".json") == 0;
}

int RunBaseline(const BaselineFlags& flags) {
  workflow::BaselineRequest request;
  request.runs = flags.runs;
  request.seconds = flags.seconds;
  request.trace_dir = flags.trace_dir;
  if (flags.inputs.size() == 1 && IsConfig(flags.inputs[0])) {
    request.config_path = flags.inputs[0];
  } else {
    request.traces = flags.inputs;
  }
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
      "Run a pipeline config N times traced (or read traces) and write the baseline `check` compares to");
  sub->add_option("input", flags->inputs, "A pipeline config (*.json), or traces of its runs")->required();
  sub->add_option("-o,--output", flags->output, "Baseline file to write (JSON, written atomically)")
      ->required();
  sub->add_option("--runs", flags->runs, "Runs of the config (default 5)")->check(CLI::PositiveNumber);
  sub->add_option("--seconds", flags->seconds, "Seconds per run (default 2)")->check(CLI::PositiveNumber);
  sub->add_option("--trace-dir", flags->trace_dir, "Keep the runs' traces in this directory");
  sub->callback([flags, &exit_code] { exit_code = RunBaseline(*flags); });
}

}  // namespace pipetune::cli

// `pipetune autotune [--trace T] [--cores N] [--memory SIZE] [-o KWARGS.json]
// -- python3 train.py ARGS`: runs a training script unchanged and retunes its
// DataLoader at each epoch boundary (workflow/autotune_job.h). The decisions
// and the lines that say them are the bootstrap's, in the program's output.
#include <fmt/format.h>

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "cli_common.h"
#include "commands.h"
#include "pipetune/workflow/autotune_job.h"

namespace pipetune::cli {
namespace {

struct AutotuneJobFlags {
  std::string trace_path = "pipetune.trace";
  int interval_ms = 100;
  std::optional<double> cores;
  std::string memory;
  std::string output;
  std::vector<std::string> command;
};

int AutotuneJob(const AutotuneJobFlags& flags) {
  workflow::AutotuneJobOptions options;
  options.trace_path = flags.trace_path;
  options.interval_ms = flags.interval_ms;
  options.cores = flags.cores;
  options.memory = flags.memory;
  options.output = flags.output;
  options.command = flags.command;
  StatusOr<workflow::AutotuneJobResult> job = workflow::AutotuneJob(options);
  if (!job.ok()) return ReportError(job.status());
  const workflow::ProfiledProgram& program = job->program;
  std::error_code error;
  if (std::filesystem::exists(job->output, error)) {
    fmt::print("settled DataLoader keyword arguments: {}\n", job->output);
  } else {
    fmt::print(
        stderr,
        "pipetune: autotune wrote no keyword arguments: no DataLoader was retuned (a stream is declined, "
        "as said above, or the program iterated none)\n");
  }
  if (program.signal_number > 0) {
    fmt::print(stderr, "pipetune: {} was killed by signal {}\n", flags.command[0], program.signal_number);
  } else if (program.exit_code != 0) {
    fmt::print(stderr, "pipetune: {} exited with status {}\n", flags.command[0], program.exit_code);
  }
  fmt::print("trace: {} (each later setting's epochs: {})\n", flags.trace_path,
             workflow::AutotuneSegmentTrace(flags.trace_path, 1));
  return program.exit_code;  // the job's own
}

}  // namespace

void RegisterAutotuneJobCommand(CLI::App& app, int& exit_code) {
  auto flags = std::make_shared<AutotuneJobFlags>();
  CLI::App* sub = app.add_subcommand(
      "autotune",
      "Run a PyTorch training script unchanged and retune its DataLoader at each epoch boundary: "
      "pipetune autotune -- python3 train.py ...");
  sub->add_option("--trace", flags->trace_path, "Trace of the epochs before the first change")
      ->capture_default_str();
  sub->add_option("--interval-ms", flags->interval_ms, "Snapshot interval")
      ->check(Number({.what = "milliseconds", .min = 1, .max = 60000, .whole = true}))
      ->capture_default_str();
  sub->add_option("--cores", flags->cores, "Core budget (default: the host's usable cores)")
      ->check(Positive("cores"));
  sub->add_option("--memory", flags->memory,
                  "Memory budget, e.g. 8GiB (default: 90% of the host's available)");
  sub->add_option(
      "-o,--output", flags->output,
      "Where the settled DataLoader keyword arguments go (default: TRACE's stem + .dataloader.json)");
  sub->add_option("command", flags->command, "The program and its arguments, after --")->required();
  sub->callback([flags, &exit_code] { exit_code = AutotuneJob(*flags); });
}

}  // namespace pipetune::cli

// `pipetune autotune [--trace T] [--cores N] [--memory SIZE] [-o KWARGS.json]
// -- python3 train.py ARGS`: runs a training script unchanged and retunes its
// DataLoader at each epoch boundary (workflow/autotune_job.h). The decisions
// and the lines that say them are the bootstrap's, in the program's output.
// The command's flags are parsed in cmd_autotune.cc, with the config form's.
#include <fmt/format.h>

#include <filesystem>
#include <string>

#include "cli_common.h"
#include "cmd_autotune.h"
#include "pipetune/workflow/autotune_job.h"

namespace pipetune::cli {

int RunAutotuneJob(const AutotuneFlags& flags) {
  workflow::AutotuneJobOptions options;
  options.trace_path = flags.trace_path.empty() ? "pipetune.trace" : flags.trace_path;
  if (flags.interval_ms) options.interval_ms = *flags.interval_ms;
  options.cores = flags.cores;
  options.memory = flags.memory;
  options.output = flags.output;
  options.command = flags.inputs;
  StatusOr<workflow::AutotuneJobResult> job = workflow::AutotuneJob(options);
  if (!job.ok()) return ReportError(job.status());
  const workflow::ProfiledProgram& program = job->program;
  for (const std::string& note : job->notes) fmt::print(stderr, "pipetune autotune: {}\n", note);
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
    fmt::print(stderr, "pipetune: {} was killed by signal {}\n", options.command[0], program.signal_number);
  } else if (program.exit_code != 0) {
    fmt::print(stderr, "pipetune: {} exited with status {}\n", options.command[0], program.exit_code);
  }
  fmt::print("trace: {} (each later setting's epochs: {})\n", options.trace_path,
             workflow::AutotuneSegmentTrace(options.trace_path, 1));
  return program.exit_code;  // the job's own
}

}  // namespace pipetune::cli

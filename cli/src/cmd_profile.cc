// `pipetune profile [--trace FILE] -- COMMAND ...`: runs any program with
// tracing on. A program that links pipetune's tracer starts recording before
// main() when PIPETUNE_TRACE names a file; this command sets it and waits.
#include <fmt/format.h>

#include <string>
#include <vector>

#include "cli_common.h"
#include "commands.h"
#include "pipetune/base/status.h"
#include "pipetune/workflow/profile_program.h"
#include "pipetune/workflow/python_bootstrap.h"

namespace pipetune::cli {
namespace {

struct ProfileFlags {
  std::string trace_path = "pipetune.trace";
  int interval_ms = 100;
  std::vector<std::string> command;
  std::string apply;      // DataLoader keyword arguments or a tf.data plan (docs/pytorch.md, docs/tfdata.md)
  bool no_trace = false;  // only --apply: the program as the plan's code change would run it
};

// A Python program, or a launcher of Python ranks.
bool IsPythonProgram(const std::vector<std::string>& command) {
  for (const std::string& arg : command) {
    std::string base = arg.substr(arg.rfind('/') + 1);
    if (base.rfind("python", 0) == 0 || base == "torchrun" ||
        (base.size() > 3 && base.compare(base.size() - 3, 3, ".py") == 0)) {
      return true;
    }
  }
  return false;
}

int Profile(const ProfileFlags& flags) {
  if (flags.no_trace && flags.apply.empty()) {
    return ReportError(InvalidInput(
        "--no-trace records nothing and only applies a plan: give --apply PLAN (without it, run the program "
        "itself)"));
  }
  workflow::ProfileOptions options;
  options.record = !flags.no_trace;
  options.trace_path = flags.trace_path;
  options.interval_ms = flags.interval_ms;
  options.command = flags.command;
  // Python programs: the bootstrap that records (and with --apply, tunes) DataLoaders and tf.data.
  StatusOr<workflow::PythonEnvironment> python = workflow::PythonBootstrapEnvironment(flags.apply);
  if (!python.ok()) return ReportError(python.status());
  if (!python->warning.empty() && flags.command[0].find("python") != std::string::npos) {
    fmt::print(stderr, "pipetune: warning: {}\n", python->warning);
  }
  options.environment = python->variables;
  StatusOr<workflow::ProfiledProgram> profiled = workflow::ProfileProgram(options);
  if (!profiled.ok()) return ReportError(profiled.status());
  const std::string& program = flags.command[0];
  if (flags.no_trace) {
    if (profiled->signal_number > 0) {
      fmt::print(stderr, "pipetune: {} was killed by signal {}\n", program, profiled->signal_number);
    } else if (profiled->exit_code != 0) {
      fmt::print(stderr, "pipetune: {} exited with status {}\n", program, profiled->exit_code);
    }
    return profiled->exit_code;
  }
  if (profiled->recorded_nothing && IsPythonProgram(flags.command) && python->warning.empty()) {
    fmt::print(stderr,
               "pipetune: {} recorded no pipeline: none of its processes built a PyTorch DataLoader "
               "(see docs/pytorch.md), and no GPU activity; the trace says why\n",
               program);
  } else if (profiled->recorded_nothing) {
    fmt::print(stderr,
               "pipetune: {} recorded no pipeline (it does not link pipetune's tracer; see docs/tracer.md) "
               "and no GPU activity; the trace says why\n",
               program);
  }
  // A job's processes, each: the program's own status may be its launcher's.
  for (const workflow::ProfiledProcess& process : profiled->processes) {
    if (profiled->processes.size() < 2) break;
    std::string who = process.rank ? fmt::format("rank {} (pid {})", *process.rank, process.pid)
                                   : fmt::format("pid {}", process.pid);
    if (process.ended == "killed") {
      fmt::print(stderr, "pipetune: {} was killed (its trace {} has no clean end)\n", who, process.trace);
    } else if (process.ended == "failed") {
      std::string how = process.exception.empty() ? fmt::format("status {}", process.exit_status.value_or(1))
                                                  : process.exception;
      fmt::print(stderr, "pipetune: {} failed: {}\n", who, how);
    }
  }
  if (profiled->processes.size() > 1) {
    fmt::print("traces: {} processes recorded a DataLoader ({} and {}.main.<pid>)\n",
               profiled->processes.size(), flags.trace_path, flags.trace_path);
  }
  if (profiled->signal_number > 0) {
    fmt::print(stderr, "pipetune: {} was killed by signal {}; the trace holds what it recorded until then\n",
               program, profiled->signal_number);
  } else if (profiled->exit_code != 0) {
    fmt::print(stderr, "pipetune: {} exited with status {}\n", program, profiled->exit_code);
  }
  fmt::print("trace: {} ({} bytes)\n", flags.trace_path, profiled->trace_bytes);
  // The program's own exit status passes through, so scripts see its failure.
  return profiled->exit_code;
}

}  // namespace

void RegisterProfileCommand(CLI::App& app, int& exit_code) {
  auto flags = std::make_shared<ProfileFlags>();
  CLI::App* sub =
      app.add_subcommand("profile", "Run any program with tracing on: pipetune profile -- COMMAND ...");
  sub->add_option("--trace", flags->trace_path, "Trace file to write")->capture_default_str();
  sub->add_option("--interval-ms", flags->interval_ms, "Snapshot interval")
      ->check(Number({.what = "milliseconds", .min = 1, .max = 60000, .whole = true}))
      ->capture_default_str();
  sub->add_option("--apply", flags->apply,
                  "A file pipetune tune wrote for a Python program, applied without changing it: "
                  "DataLoader keyword arguments, or a tf.data plan keyed by call site");
  sub->add_flag("--no-trace", flags->no_trace,
                "Record nothing: run the program under --apply's plan as its code change would run "
                "(tracing's cost left out; a tf.data plan's autotuner setting applied, docs/tfdata.md)");
  sub->add_option("command", flags->command, "The program and its arguments, after --")->required();
  sub->callback([flags, &exit_code] { exit_code = Profile(*flags); });
}

}  // namespace pipetune::cli

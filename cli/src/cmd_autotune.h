// `pipetune autotune`: one command, two forms. `autotune CONFIG` retunes the
// engine while the config runs (cmd_autotune.cc); `autotune -- PROGRAM ...`
// retunes a PyTorch DataLoader at its epoch boundaries (cmd_autotune_job.cc).
// The flags are parsed once, here, for both.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace pipetune::cli {

struct AutotuneFlags {
  // CONFIG, or the program and its arguments (after --).
  std::vector<std::string> inputs;
  std::vector<std::string> program;  // what CLI11 parsed after -- (joined to inputs)
  std::string output;
  std::string trace_path;  // default: OUTPUT.ptrace (a config), pipetune.trace (a program)
  std::optional<double> cores;
  std::string memory;
  // The config form only.
  std::optional<double> seconds;
  std::optional<double> refit_every;
  std::optional<int> max_threads;
  // The program form only.
  std::optional<int> interval_ms;
};

// Whether `inputs` name a pipeline config rather than a program to run: one
// input ending in .json (a program is run through its interpreter, python3
// train.py, or is an executable).
bool NamesAConfig(const std::vector<std::string>& inputs);

int RunAutotuneConfig(const AutotuneFlags& flags);
int RunAutotuneJob(const AutotuneFlags& flags);

}  // namespace pipetune::cli

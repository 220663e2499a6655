// `pipetune autotune -- python3 train.py ARGS`: runs a PyTorch training
// script unchanged and retunes its DataLoader at each epoch boundary (each
// new iterator), docs/pytorch.md, "autotune: retuning a live job".
//
// The decisions are made inside the program, by the bootstrap
// (python/pipetune/_autotune.py): at a boundary it ends the trace of the
// epochs run at the current settings (a segment), runs this binary's
// `tune` on it with the budgets given here, applies the plan to the next
// iterator, and measures it. This side only checks the budgets, hands them
// to the bootstrap through PIPETUNE_AUTOTUNE (a JSON object: "pipetune",
// "cores", "memory", "output", "segments"), and runs the program as `profile` does:
// the program's exit status passes through.
//
//   AutotuneJobOptions options;
//   options.trace_path = "out/train.trace";
//   options.command = {"python3", "train.py"};
//   StatusOr<AutotuneJobResult> job = AutotuneJob(options);
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "pipetune/base/status.h"
#include "pipetune/workflow/profile_program.h"

namespace pipetune::workflow {

struct AutotuneJobOptions {
  std::string trace_path = "pipetune.trace";  // the first segment; later ones are STEM-retune-K.trace
  int interval_ms = 100;
  std::optional<double> cores;  // unset: the traced host's usable cores
  std::string memory;           // "8GiB"; empty: 90% of the traced host's available memory
  std::string output;           // the settled kwargs; empty: STEM.dataloader.json beside the trace
  std::vector<std::string> command;
};

struct AutotuneJobResult {
  ProfiledProgram program;
  std::string output;  // where the bootstrap writes the settled kwargs (absent when it declined)
};

// The trace of the K-th settings' epochs (K >= 1), beside `trace`:
// out/train.trace -> out/train-retune-1.trace. The bootstrap is handed the
// pattern ("segments": out/train-retune-{k}.trace), so the name is made here only.
std::string AutotuneSegmentPattern(const std::string& trace);
std::string AutotuneSegmentTrace(const std::string& trace, int k);

// Errors (before anything runs): a bad budget (kInvalidInput naming the
// flag), no Python bootstrap found, an empty command or one that cannot
// start. Stale segment traces of an earlier run beside the trace are
// deleted first.
StatusOr<AutotuneJobResult> AutotuneJob(const AutotuneJobOptions& options);

}  // namespace pipetune::workflow

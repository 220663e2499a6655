// `pipetune autotune -- python3 train.py ARGS`: runs a PyTorch training
// script unchanged and retunes its DataLoader at each epoch boundary (each
// new iterator), docs/pytorch.md, "autotune: retuning a live job".
//
// At each epoch boundary the bootstrap (python/pipetune/_autotune.py) ends
// the trace of the epochs run at the current settings (a segment) and asks
// this process what to run next: an EpochDecider (autotune_epochs.h, the
// retuning rules every driver shares) served on a Unix socket while the job
// runs, named to the bootstrap in PIPETUNE_AUTOTUNE (a JSON object:
// "decider", the socket's path; "segments", the segment traces' pattern).
// The bootstrap applies what it is told and holds no rule of its own. The
// program runs as `profile` runs it: its exit status passes through. The
// settled kwargs are written by the decider when it settles, else (the job
// ended while exploring) the best measured ones once the job has ended.
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
  std::string output;              // where the settled kwargs are written (absent when the job declined)
  std::vector<std::string> notes;  // said after the job (a settled file that could not be written)
};

// The trace of the K-th settings' epochs (K >= 1), beside `trace`:
// out/train.trace -> out/train-retune-1.trace. The bootstrap is handed the
// pattern ("segments": out/train-retune-{k}.trace), so the name is made here only.
std::string AutotuneSegmentPattern(const std::string& trace);
std::string AutotuneSegmentTrace(const std::string& trace, int k);

// Errors (before anything runs): a bad budget (kInvalidInput naming the
// flag), no Python bootstrap found, no socket for the decider, an empty
// command or one that cannot start. Stale segment traces of an earlier run beside the trace are
// deleted first.
StatusOr<AutotuneJobResult> AutotuneJob(const AutotuneJobOptions& options);

}  // namespace pipetune::workflow

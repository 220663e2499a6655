// `pipetune tune TRACE --verify -- python3 train.py` for a PyTorch
// DataLoader (dataloader_verify.cc): run, tune, re-run applied, refit.
#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <vector>

#include "pipetune/base/json.h"
#include "pipetune/base/status.h"
#include "pipetune/tuner/plan.h"
#include "pipetune/tuner/tune_input.h"
#include "pipetune/workflow/python_bootstrap.h"

namespace pipetune::workflow {

// `pipetune tune --verify -- COMMAND`: runs COMMAND profiled, tunes, runs it
// again with the tuned kwargs applied, refits from that run and tunes again;
// keeps the round with the highest measured batches/s.
struct DataLoaderVerifyOptions {
  std::vector<std::string> command;
  tuner::BudgetFlags budgets;
  std::string trace = "pipetune.trace";  // round 0's; round N's: STEM-round-N.EXT (DataLoaderRoundTrace)
  std::string output;                    // the best round's kwargs; empty: DataLoaderKwargsPath("", trace)
  int rounds = 1;                        // applied runs after the first
  tuner::Objective objective = tuner::Objective::kMax;
  int interval_ms = 100;
  bool program_stdout_to_stderr = false;  // ProfileOptions::stdout_to_stderr, for JSON on stdout
  // Round 0 already ran into `trace` (Verify ran it to learn the program's
  // kind, commands.cc): it is read, not run again.
  bool first_round_ran = false;
};
struct DataLoaderRound {
  int index = 0;
  // The settings the round ran with: null in round 0 (the script's own),
  // else the plan's keyword arguments, as written.
  Json applied;
  std::string trace;
  double measured_batches_per_second = 0;
  double predicted_batches_per_second = 0;  // by the plan that chose these settings; 0 in round 0
  int exit_code = 0;
  int workers = 0;  // num_workers that ran
};
struct DataLoaderVerifyResult {
  std::vector<DataLoaderRound> rounds;
  size_t best = 0;          // RunTuningLoop's (verify.h): the one loop for configs and DataLoaders
  std::string stop_reason;  // "1 round of tuning", "the plan changed nothing"
  std::string output;
  Json kwargs;  // the best round's keyword arguments, as written to `output`
  std::string code_change;
};
std::string DataLoaderRoundTrace(const std::string& trace, int round);
// One round of a program's tuning loop (a DataLoader's or a tf.data
// script's), traced into `trace`: round 0 is the program as written (not
// run again when it ran already to tell the program's kind:
// options.first_round_ran), a later round runs with the settings
// `settings_of` reads (the file the round before planned) handed to its
// recorder. The program's exit status (0 for a round 0 not run again);
// kFailed naming the round when it exits non-zero.
StatusOr<int> RunProgramRound(const DataLoaderVerifyOptions& options, const std::string& trace, int round,
                              const std::function<StatusOr<ProgramSettings>()>& settings_of);
StatusOr<DataLoaderVerifyResult> VerifyDataLoader(const DataLoaderVerifyOptions& options);

}  // namespace pipetune::workflow

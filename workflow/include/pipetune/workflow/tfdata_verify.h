// tf.data's `pipetune tune TRACE` and `pipetune tune TRACE --verify --
// python3 SCRIPT` (docs/tfdata.md), as its adapter (tfdata_adapter.cc)
// calls them: the trace solved as a config's run and the plan written keyed
// by call site; and the one tuning loop (RunTuningLoop, verify.h) with each
// round applying the plan the round before it made, the best round's plan
// written. Which kind a script is, its first run tells (recording.cc).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "pipetune/base/json.h"
#include "pipetune/base/status.h"
#include "pipetune/workflow/dataloader_verify.h"
#include "pipetune/workflow/tune.h"

namespace pipetune::workflow {

struct TfDataRound {
  int index = 0;
  std::string trace;
  std::string plan;  // the plan applied; empty in round 0 (the script as written)
  double measured_throughput = 0;
  double predicted_throughput = 0;       // by the plan applied; 0 in round 0
  int threads = 0;                       // each map's parallelism, one per other stage
  std::vector<std::string> code_change;  // of the plan this round's trace made
};

struct TfDataVerifyResult {
  std::vector<TfDataRound> rounds;
  size_t best = 0;  // RunTuningLoop's (verify.h)
  std::string stop_reason;
  std::string output;  // the best round's plan, written (an empty plan when round 0 was best)
  std::vector<std::string> code_change;
};

// The plan for a tf.data trace: solved without graph rewrites (TensorFlow
// fuses maps itself, and a plan sets knobs at calls), mapped back to the
// script's calls (TfDataPlanFrom) and written to request.output, else beside
// the trace (TfDataPlanPath). `written` and `written_text` say where, with
// the code change. Errors: the trace's, the solver's, a C++ source named
// (a tf.data plan goes to call sites), the plan that cannot be written.
StatusOr<TuneResult> TuneTfDataTrace(const TuneRequest& request);

// Runs the loop, round 0 (the script as written) into options.trace unless
// options.first_round_ran; the plan goes to options.output, else beside the
// trace. Errors: a round that exits non-zero (kFailed), a trace that is not
// a tf.data one or cannot be tuned.
StatusOr<TfDataVerifyResult> VerifyTfData(const DataLoaderVerifyOptions& options);

std::string FormatTfDataVerify(const TfDataVerifyResult& result);
Json TfDataVerifyToJson(const TfDataVerifyResult& result);

}  // namespace pipetune::workflow

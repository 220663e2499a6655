// `pipetune tune TRACE --verify -- python3 SCRIPT` for any Python script the
// bootstrap records: its first run (the script as written) tells a tf.data
// script from a DataLoader's, and the loop of that kind follows (the
// DataLoader's in dataloader.h; tf.data's here, docs/tfdata.md). Each round
// of a tf.data script applies the plan the round before it made, keyed by
// call site, and the best round's plan is written.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "pipetune/base/json.h"
#include "pipetune/base/status.h"
#include "pipetune/workflow/dataloader.h"

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

// One of the two, by the kind of the script's first run.
struct PythonVerifyResult {
  std::optional<DataLoaderVerifyResult> dataloader;
  std::optional<TfDataVerifyResult> tfdata;
};

// Runs round 0 into options.trace, then the loop of its kind; the plan (or
// keyword arguments) goes to options.output, else beside the trace. Errors:
// no program, a round that exits non-zero (kFailed), a trace that cannot be
// tuned, and VerifyDataLoader's.
StatusOr<PythonVerifyResult> VerifyPythonProgram(DataLoaderVerifyOptions options);

std::string FormatTfDataVerify(const TfDataVerifyResult& result);
Json TfDataVerifyToJson(const TfDataVerifyResult& result);

}  // namespace pipetune::workflow

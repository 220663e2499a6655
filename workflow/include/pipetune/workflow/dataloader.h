// PyTorch DataLoaders, as users run them (docs/pytorch.md):
//   pipetune profile [--apply TUNED.json] -- python3 train.py   (the bootstrap's environment)
//   pipetune report TRACE / pipetune tune TRACE                   (OpenRecording tells a DataLoader's)
//   pipetune tune TRACE --verify -- python3 train.py                  (run, tune, re-run applied, refit)
// The CLI parses flags and prints; everything else is here.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "pipetune/analyzer/dataloader_model.h"
#include "pipetune/base/json.h"
#include "pipetune/base/status.h"
#include "pipetune/models/rate_model.h"
#include "pipetune/tuner/plan.h"
#include "pipetune/tuner/tune_input.h"
#include "pipetune/workflow/dataloader_kwargs.h"
#include "pipetune/workflow/dataloader_plan.h"
#include "pipetune/workflow/dataloader_verify.h"
#include "pipetune/workflow/profile_program.h"
#include "pipetune/workflow/python_bootstrap.h"

namespace pipetune::workflow {

// The rounds as a table, then where the best round's keyword arguments went
// and the code change (what `tune --verify -- PROGRAM` prints).
std::string FormatDataLoaderRounds(const DataLoaderVerifyResult& result);
std::string FormatDataLoaderVerify(const DataLoaderVerifyResult& result);
// The same as JSON, in the shape of a config's verify (VerifiedTuneToJson):
// "rounds" [{"round", "settings" (null: the script's own), "predicted_throughput"
// (0 in round 0), "measured_throughput" (batches/s), "workers"}], "best_round",
// "measured_throughput", "predicted_throughput", "stop_reason", then
// "output" (the keyword arguments written), "dataloader_kwargs" and "code_change".
Json DataLoaderVerifyToJson(const DataLoaderVerifyResult& result);

}  // namespace pipetune::workflow

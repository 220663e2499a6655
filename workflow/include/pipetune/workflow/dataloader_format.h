// A DataLoader's verify rounds as text and JSON (dataloader_format.cc).
#pragma once

#include <string>

#include "pipetune/base/json.h"
#include "pipetune/workflow/dataloader_verify.h"

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

// A DataLoader's verify rounds as text and JSON (dataloader_format.h).
#include "pipetune/workflow/dataloader_format.h"

#include <fmt/format.h>

#include "pipetune/base/json.h"
#include "pipetune/workflow/verify.h"

namespace pipetune::workflow {

std::string FormatDataLoaderRounds(const DataLoaderVerifyResult& result) {
  std::string out =
      fmt::format("{:<6} {:<60} {:>12} {:>12}\n", "round", "settings", "measured b/s", "predicted");
  for (const DataLoaderRound& r : result.rounds) {
    std::string settings = r.applied.is_null() ? "the script's own" : r.applied.dump();
    out +=
        fmt::format("{:<6} {:<60} {:>12.2f} {:>12}{}\n", r.index, settings, r.measured_batches_per_second,
                    r.index == 0 ? std::string("-") : fmt::format("{:.2f}", r.predicted_batches_per_second),
                    &r == &result.rounds[result.best] ? "  <- best" : "");
  }
  return out + fmt::format("stopped: {}\n", result.stop_reason);
}

std::string FormatDataLoaderVerify(const DataLoaderVerifyResult& result) {
  return FormatDataLoaderRounds(result) +
         fmt::format("DataLoader keyword arguments (round {}): {}\ncode change: {}\n",
                     result.rounds[result.best].index, result.output, result.code_change);
}

Json DataLoaderVerifyToJson(const DataLoaderVerifyResult& result) {
  std::vector<VerifyRoundRow> rounds;
  for (const DataLoaderRound& r : result.rounds) {
    rounds.push_back({r.index, "settings", r.applied, r.predicted_batches_per_second,
                      r.measured_batches_per_second, "workers", r.workers});
  }
  Json document = VerifyLoopToJson(rounds, result.best, result.stop_reason);
  document["output"] = result.output;
  document["dataloader_kwargs"] = result.kwargs;
  document["code_change"] = result.code_change;
  return document;
}

}  // namespace pipetune::workflow

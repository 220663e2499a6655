// What-if questions to the rate model: "with N more cores", "with stage X at
// parallelism P", "with a cache after stage K", alone or together.
//
// Text form (the CLI's --what-if), changes separated by commas:
//   cores=4            4 cores in all
//   cores=+2           2 more cores than the run had
//   decode.parallelism=3
//   cache=decode       a cache right after stage decode
//   cache=none         no cache (removes the run's own)
//   num_workers=2      a worker group's workers (0: the consumer's thread runs it)
//   prefetch_factor=4  outputs each worker of a group holds ready
//   persistent_workers=true, pin_memory=false   a group's persistence, a switchable stage
// e.g. "cores=4,decode.parallelism=3". The last four are the names a
// pipeline's worker groups and switchable stages carry (a PyTorch
// DataLoader's settings); a pipeline without them refuses them.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "pipetune/base/status.h"
#include "pipetune/models/profile.h"
#include "pipetune/models/rate_model.h"

namespace pipetune::analyzer {

struct WhatIf {
  std::string text;                                      // as given, for the report
  std::optional<double> cores;                           // in all
  double more_cores = 0;                                 // added to the run's (or to `cores`)
  std::vector<std::pair<std::string, int>> parallelism;  // stage name, workers
  std::optional<std::string> cache_after;                // stage name
  bool remove_cache = false;
  // Worker-group and switchable-stage knobs by the user's name, with the
  // value as parsed (workers >= 0, buffer >= 1, 0/1 for true/false).
  std::vector<std::pair<std::string, int>> named;
};

// The knob names a pipeline's groups and stages may carry (a DataLoader's).
inline constexpr const char* kNumWorkersKnob = "num_workers";
inline constexpr const char* kPrefetchFactorKnob = "prefetch_factor";
inline constexpr const char* kPersistentWorkersKnob = "persistent_workers";
inline constexpr const char* kPinMemoryKnob = "pin_memory";
inline constexpr const char* kFetchThreadsKnob =
    "fetch_threads";  // pipetune's own (python/pipetune/_fetch.py)

// Errors (kInvalidInput) quote the text and say what was expected.
StatusOr<WhatIf> ParseWhatIf(std::string_view text);

struct WhatIfOutcome {
  std::string question;                               // the text as given
  bool allowed = true;                                // false: the change is impossible (see note)
  std::string note;                                   // why not; or what the model assumed
  double throughput = 0;                              // predicted outputs/s
  double speedup = 0;                                 // over the prediction for the configuration that ran
  models::BoundKind bound = models::BoundKind::kCpu;  // the bound that binds
  std::optional<std::string> bottleneck;
  double cores_used = 0;
  std::optional<double> cache_bytes;  // when a cache is part of the question
};

// Applies `what_if` to the configuration the profile watched and predicts.
// Errors (kInvalidInput): a stage the pipeline does not have, parallelism on
// a stage without workers, fewer than one worker, no cores, a named knob the
// pipeline does not have (num_workers on a config), 0 workers for a group
// that cannot run on the consumer's thread.
StatusOr<WhatIfOutcome> EvaluateWhatIf(const models::Profile& profile, const WhatIf& what_if);

// The configuration the question describes (for callers that want the full
// prediction). Same errors as EvaluateWhatIf.
StatusOr<models::Configuration> ApplyWhatIf(const models::Profile& profile, const WhatIf& what_if);

}  // namespace pipetune::analyzer

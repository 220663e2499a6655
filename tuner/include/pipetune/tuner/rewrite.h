// Plan -> knobs, for both kinds of pipeline.
//
// A config: the tuned config, the same JSON document with the plan's knobs
// set, its stages inserted (a prefetch at the end, a cache) and a moved
// cache removed; every other key, unknown ones included, and their order
// kept (models::ToJson). Save it with models::SaveConfig (validated, written
// to a temporary file and renamed into place).
//
// A DataLoader (a profile with a worker group, as analyzer's
// DataLoaderModelProfile builds it): the keyword arguments a plan's
// configuration stands for, and back.
#pragma once

#include <string>

#include "pipetune/base/status.h"
#include "pipetune/models/config.h"
#include "pipetune/tuner/plan.h"

namespace pipetune::tuner {

// Errors (kInvalidInput): the plan names stages the config does not have, or
// the config has stages the plan does not know (a plan of another pipeline),
// or the result does not validate.
StatusOr<models::PipelineConfig> ApplyPlan(const models::PipelineConfig& config, const Plan& plan);

// A DataLoader's keyword arguments the tuner sets: the worker group's
// workers, buffer per worker and persistence, and whether the stage named
// "pin_memory" runs. prefetch_factor is 2 (torch's default) at 0 workers.
struct DataLoaderKnobs {
  int num_workers = 0;
  int prefetch_factor = 2;
  bool persistent_workers = false;
  bool pin_memory = false;
  bool operator==(const DataLoaderKnobs&) const = default;
};

// The knobs `config` of `profile` stands for (a plan's: Plan::configuration).
// PIPETUNE_CHECK: the profile has a worker group and `config` is of it.
DataLoaderKnobs DataLoaderKnobsOf(const models::Profile& profile, const models::Configuration& config);
// The knobs the traced run had.
DataLoaderKnobs TracedKnobs(const models::Profile& profile);
// The configuration of `profile` with `knobs` set (everything else as traced).
models::Configuration ConfigurationFor(const models::Profile& profile, const DataLoaderKnobs& knobs);

// A line diff in the unified format ("--- old", "+++ new", "@@ -a,b +c,d @@"
// hunks with `context` unchanged lines around each change). Empty when the
// texts are equal.
std::string UnifiedDiff(const std::string& old_text, const std::string& new_text, const std::string& old_name,
                        const std::string& new_name, int context = 3);

}  // namespace pipetune::tuner

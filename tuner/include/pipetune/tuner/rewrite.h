// Plan -> knobs, for both kinds of pipeline.
//
// A config: the tuned config, the same JSON document with the plan's knobs
// set, its stages inserted (a prefetch at the end, a cache) and a moved
// cache removed; every other key, unknown ones included, and their order
// kept (models::ToJson). Save it with models::SaveConfig (validated, written
// to a temporary file and renamed into place).
//
// A DataLoader's plan is written from its configuration by the knobs its
// profile names (models/knob_values.h), in workflow/.
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

// A line diff in the unified format ("--- old", "+++ new", "@@ -a,b +c,d @@"
// hunks with `context` unchanged lines around each change). Empty when the
// texts are equal.
std::string UnifiedDiff(const std::string& old_text, const std::string& new_text, const std::string& old_name,
                        const std::string& new_name, int context = 3);

}  // namespace pipetune::tuner

// The one sentence of a diagnosis: what limits the pipeline, and the change
// that would help most, with the throughput the model predicts for it.
#pragma once

#include <string>

#include "pipetune/models/profile.h"
#include "pipetune/models/rate_model.h"

namespace pipetune::analyzer::internal {

std::string Explain(const models::Profile& profile, const models::Prediction& prediction);

}  // namespace pipetune::analyzer::internal

// The one JSON type every part reads and writes (configs, reports, plans,
// baselines): nlohmann's, with keys kept in the order they were written, so
// that a file pipetune rewrites keeps the user's order.
#pragma once

#include <nlohmann/json.hpp>

namespace pipetune {

using Json = nlohmann::ordered_json;

}  // namespace pipetune

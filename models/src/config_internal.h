// Private helpers shared by the config parser and the typed arg accessors.
#pragma once

#include <string>
#include <string_view>

#include "pipetune/models/config.h"

namespace pipetune::models::internal {

// How a value reads in an error: `0`, `"abc"`, `an object`, `null`.
std::string DescribeJsonValue(const Json& value);

// Integer check that accepts 3 but not 3.5, "3" or true.
bool IsInteger(const Json& value);

}  // namespace pipetune::models::internal

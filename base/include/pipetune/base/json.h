// The one JSON type every part reads and writes (configs, reports, plans,
// baselines): nlohmann's, with keys kept in the order they were written, so
// that a file pipetune rewrites keeps the user's order.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

namespace pipetune {

using Json = nlohmann::ordered_json;

// Serialises `j` (indent < 0: one line). Every JSON pipetune writes goes
// through here: names in a trace are whatever bytes the traced program
// gave, and a string that is not valid UTF-8 has each bad byte replaced by
// U+FFFD, where nlohmann's own dump() throws (and a report, plan or
// baseline of that trace would stop the program; found by
// fuzz/trace_analysis_fuzz.cc, tests/analyzer/regressions/).
template <typename J>
std::string DumpJson(const J& j, int indent = -1) {
  return j.dump(indent, ' ', false, J::error_handler_t::replace);
}

}  // namespace pipetune

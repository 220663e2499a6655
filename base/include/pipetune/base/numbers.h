// Small arithmetic every part needs the same way, so that a figure computed
// in the gate, the model or a report cannot drift between copies.
#pragma once

#include <fmt/format.h>

#include <algorithm>
#include <string>
#include <vector>

namespace pipetune {

// num / den, or 0 when den is not positive (an empty run: no elements, no
// seconds), so that a ratio of nothing reads as nothing rather than NaN.
inline double SafeDiv(double num, double den) { return den > 0 ? num / den : 0.0; }

// The middle value (the mean of the two middle ones for an even count);
// 0 for no values.
inline double Median(std::vector<double> values) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  size_t mid = values.size() / 2;
  return values.size() % 2 == 1 ? values[mid] : (values[mid - 1] + values[mid]) / 2;
}

// A share as a whole percentage: 0.4123 -> "41%".
inline std::string Percent(double fraction) { return fmt::format("{:.0f}%", 100.0 * fraction); }

}  // namespace pipetune

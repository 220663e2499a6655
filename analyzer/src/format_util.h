// Number formatting shared by the sentence and every report writer, so that
// a figure reads the same everywhere.
#pragma once

#include <fmt/format.h>

#include <cmath>
#include <optional>
#include <string>

#include "pipetune/base/json.h"
#include "pipetune/base/numbers.h"

namespace pipetune::analyzer::internal {

// Three significant figures or so: 1234 -> "1234", 41.23 -> "41.2", 0.523 -> "0.52".
inline std::string Rate(double x) {
  if (!std::isfinite(x)) return "unbounded";
  double a = std::fabs(x);
  if (a >= 100) return fmt::format("{:.0f}", x);
  if (a >= 10) return fmt::format("{:.1f}", x);
  if (a >= 0.01 || a == 0) return fmt::format("{:.2f}", x);
  return fmt::format("{:.2g}", x);
}

using pipetune::Percent;  // 0.4123 -> "41%"

// Milliseconds with sensible precision: 0.0123 -> "0.012", 12.34 -> "12.3".
inline std::string Millis(double ms) {
  if (ms >= 100) return fmt::format("{:.0f}", ms);
  if (ms >= 10) return fmt::format("{:.1f}", ms);
  if (ms >= 0.1) return fmt::format("{:.2f}", ms);
  if (ms == 0) return "0";
  return fmt::format("{:.2g}", ms);
}

// A number for the JSON report: rounded to six significant figures, so that
// the output does not change with the last bits of a floating-point sum;
// null for +-inf/NaN (an unbounded stage has no maximum throughput).
inline Json Number(double x) {
  if (!std::isfinite(x)) return nullptr;
  if (x == 0) return 0.0;
  return std::stod(fmt::format("{:.6g}", x));
}

// A string the JSON report may not have: null when absent.
inline Json Optional(const std::optional<std::string>& s) { return s ? Json(*s) : Json(nullptr); }

inline std::string Cores(double cores) { return fmt::format("{:.2f}", cores); }

// A number of cores the run had: "2", or "1.5" for a fractional quota.
inline std::string CoreCount(double cores) {
  if (std::fabs(cores - std::round(cores)) < 1e-9) return fmt::format("{:.0f}", cores);
  return fmt::format("{:.2g}", cores);
}

}  // namespace pipetune::analyzer::internal

// Prefetch depth from the spread of output arrivals (queue_model.h).
#include "pipetune/models/queue_model.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace pipetune::models {
namespace {

// Below this, a buffer cannot decouple the last stage from the consumer.
constexpr int64_t kMinBuffer = 2;

}  // namespace

std::optional<ArrivalSpread> SpreadFromCounts(const std::vector<double>& counts_per_interval) {
  size_t n = counts_per_interval.size();
  if (n < 3) return std::nullopt;
  double sum = 0;
  for (double c : counts_per_interval) sum += c;
  if (sum < 10) return std::nullopt;
  double mean = sum / static_cast<double>(n);
  double squares = 0;
  for (double c : counts_per_interval) squares += (c - mean) * (c - mean);
  double variance = squares / static_cast<double>(n - 1);
  return ArrivalSpread{std::sqrt(variance / mean), n};
}

PrefetchSizing SizePrefetch(const PrefetchQuery& query) {
  PrefetchSizing sizing;
  int64_t max_buffer = std::max(query.max_buffer, kMinBuffer);
  sizing.buffer = kMinBuffer;
  if (!query.step_seconds || *query.step_seconds <= 0 || query.producer_throughput <= 0) {
    sizing.reason = "the consumer takes outputs as fast as they come: 2 decouple the last stage from it";
    return sizing;
  }
  double per_step = query.producer_throughput * *query.step_seconds;  // X s
  sizing.drift_per_step = per_step - 1;
  sizing.variance_per_step =
      per_step * query.arrival_cv * query.arrival_cv + per_step * per_step * query.step_cv * query.step_cv;
  if (sizing.drift_per_step <= 1e-9) {
    sizing.reason = fmt::format(
        "the pipeline delivers {:.2f} outputs per consumer step: the consumer waits whatever the depth; "
        "2 keep the last stage from blocking",
        per_step);
    return sizing;
  }
  sizing.pipeline_faster = true;
  double eps = std::clamp(query.stall_probability, 1e-9, 0.5);
  double wanted = sizing.variance_per_step * std::log(1.0 / eps) / (2.0 * sizing.drift_per_step) + 1.0;
  double capped = std::min(std::ceil(wanted), static_cast<double>(max_buffer));
  sizing.buffer = std::max(kMinBuffer, static_cast<int64_t>(capped));
  sizing.clamped = wanted > static_cast<double>(max_buffer);
  sizing.reason = fmt::format(
      "outputs arrive {:.2f} per consumer step (spread cv {:.2f}): {} absorb a slow run with stall "
      "probability {:g}{}",
      per_step, query.arrival_cv, sizing.buffer, eps,
      sizing.clamped ? fmt::format(" (the model asked for {:.0f}; capped)", std::ceil(wanted)) : "");
  return sizing;
}

}  // namespace pipetune::models

// The queue model for prefetch buffers (docs/model.md): buffers are
// sized from the measured spread of output inter-arrival times against the
// consumer's step time.
//
// The last buffer sits between the pipeline, which delivers outputs at rate X
// with inter-arrival times of coefficient of variation cv_a, and the consumer,
// which takes one output per step of mean s (coefficient of variation cv_s).
// Counted per consumer step, the buffer level is a random walk:
//
//   drift     d = X s - 1                      outputs gained per step
//   variance  v = X s cv_a^2 + (X s cv_s)^2     renewal counting (arrivals in
//                                               s) plus the step's own spread
//
// When the pipeline is faster (d > 0) the buffer fills and the consumer
// stalls only when a run of slow outputs empties it. For a walk with positive
// drift started at level B, the chance of ever reaching 0 is about
// exp(-2 d B / v) (the Brownian / Cramer-Lundberg approximation), so a stall
// probability eps per excursion needs
//
//   B = ceil(v ln(1/eps) / (2 d)) + 1           (+1: the output in hand)
//
// When the pipeline is not faster (d <= 0) no depth removes the stall: the
// consumer waits for every output anyway; two elements keep the last stage
// from blocking on its output. A consumer that drains (no step time) gets two
// for the same reason. B is clamped to [2, max_buffer].
//
// Pure functions: no I/O, no threads, no clocks.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace pipetune::models {

// The spread of the pipeline's output inter-arrival times, as measured.
struct ArrivalSpread {
  double cv = 1;       // coefficient of variation (std / mean)
  size_t samples = 0;  // 0: not measured (cv is the default)
};

// The coefficient of variation of inter-arrival times from counts of arrivals
// in equal intervals, by the index of dispersion: for a renewal process
// Var(N) / E(N) -> cv^2 over long intervals. Nullopt with fewer than three
// intervals or fewer than ten arrivals in all.
std::optional<ArrivalSpread> SpreadFromCounts(const std::vector<double>& counts_per_interval);

struct PrefetchQuery {
  double producer_throughput = 0;      // X: outputs/s the pipeline can deliver
  std::optional<double> step_seconds;  // s; nullopt: the consumer drains
  double arrival_cv = 1;               // cv_a
  double step_cv = 0;                  // cv_s
  double stall_probability = 0.01;     // eps
  int64_t max_buffer = 128;
};

struct PrefetchSizing {
  int64_t buffer = 2;
  double drift_per_step = 0;     // d (0 for a draining consumer)
  double variance_per_step = 0;  // v
  bool pipeline_faster = false;  // d > 0
  bool clamped = false;          // the formula asked for more than max_buffer
  std::string reason;            // one line for a plan
};

PrefetchSizing SizePrefetch(const PrefetchQuery& query);

}  // namespace pipetune::models

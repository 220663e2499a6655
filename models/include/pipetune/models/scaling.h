// How a stage's capacity grows with its parallelism: the Universal
// Scalability Law (Gunther),
//
//   X(p) = lambda * p / (1 + sigma * (p - 1) + kappa * p * (p - 1))
//
// lambda is one worker's rate, sigma the cost of contention (serial parts:
// Amdahl's law), kappa the cost of coherence (workers slowing each other down
// as pairs). sigma = kappa = 0 is linear scaling.
//
// FitUsl is a pure least-squares fit (Eigen) over measured points. It fits
// the per-worker latency form p / X(p) = a + b (p - 1) + c p (p - 1), linear
// in a = 1/lambda, b = sigma/lambda, c = kappa/lambda, and keeps sigma and
// kappa non-negative by choosing the best admissible sub-model. Edge cases:
//  - no usable point (parallelism < 1 or throughput <= 0 are ignored):
//    kind kNone, Throughput() is 0;
//  - one parallelism level: kind kLinear, lambda the mean per-worker rate;
//  - two levels: kappa cannot be told from sigma: Amdahl (kappa = 0), or
//    linear when the points show no contention;
//  - three or more levels: the full law, or the best sub-model when the full
//    fit would need a negative coefficient.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace pipetune::models {

// One measurement: a stage with `parallelism` workers sustained `throughput`
// elements per second while saturated (equivalently, each worker spent
// parallelism / throughput seconds per element).
struct ScalingPoint {
  double parallelism = 1;
  double throughput = 0;
};

enum class ScalingKind {
  kNone,    // no data
  kLinear,  // sigma = kappa = 0: assumed or fitted
  kAmdahl,  // kappa = 0
  kUsl,     // both
};

struct UslFit {
  ScalingKind kind = ScalingKind::kNone;
  double lambda = 0;  // elements per second of one worker
  double sigma = 0;   // contention
  double kappa = 0;   // coherence
  size_t points = 0;  // points used
  size_t levels = 0;  // distinct parallelism levels among them
  // Root mean square of (fitted - measured) / measured over the points.
  double rms_relative_error = 0;

  // X(p); 0 for kNone.
  double Throughput(double parallelism) const;
  // 1 + sigma (p - 1) + kappa p (p - 1): per-worker latency at p over that at 1.
  double Slowdown(double parallelism) const;
  // The parallelism (>= 1) where X peaks: sqrt((1 - sigma) / kappa); infinite
  // when kappa is 0.
  double PeakParallelism() const;
  // "linear (assumed)", "Amdahl: sigma 0.08 (2 levels)", ...
  std::string Describe() const;
};

UslFit FitUsl(const std::vector<ScalingPoint>& points);

}  // namespace pipetune::models

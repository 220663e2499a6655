// Least-squares fit of the Universal Scalability Law (see scaling.h).
#include "pipetune/models/scaling.h"

#include <fmt/format.h>

#include <Eigen/Dense>
#include <algorithm>
#include <cmath>
#include <limits>
#include <set>

namespace pipetune::models {
namespace {

// The per-worker latency form y = p / X = a + b (p - 1) + c p (p - 1). Each
// sub-model uses a subset of the three terms.
struct Terms {
  bool contention = false;  // b
  bool coherence = false;   // c
};

struct Candidate {
  bool ok = false;
  double a = 0, b = 0, c = 0;
  double rms = std::numeric_limits<double>::infinity();
};

double RelativeRms(const std::vector<ScalingPoint>& points, double a, double b, double c) {
  double sum = 0;
  for (const ScalingPoint& point : points) {
    double p = point.parallelism;
    double fitted = p / (a + b * (p - 1) + c * p * (p - 1));
    double error = (fitted - point.throughput) / point.throughput;
    sum += error * error;
  }
  return std::sqrt(sum / static_cast<double>(points.size()));
}

// Least squares of y on the chosen columns, weighting each point by 1/y so
// that the fit minimises relative error (a slow and a fast level count alike).
// Not `Solve`: that is the tuner's entry point (solver.h), and a reader
// following a call by its name (`git grep -w Solve`) should find one.
Candidate FitTerms(const std::vector<ScalingPoint>& points, Terms terms) {
  int columns = 1 + (terms.contention ? 1 : 0) + (terms.coherence ? 1 : 0);
  Eigen::MatrixXd design(static_cast<Eigen::Index>(points.size()), columns);
  Eigen::VectorXd target(static_cast<Eigen::Index>(points.size()));
  for (size_t row = 0; row < points.size(); ++row) {
    double p = points[row].parallelism;
    double y = p / points[row].throughput;
    double weight = 1.0 / y;
    auto r = static_cast<Eigen::Index>(row);
    int column = 0;
    design(r, column++) = weight;
    if (terms.contention) design(r, column++) = (p - 1) * weight;
    if (terms.coherence) design(r, column++) = p * (p - 1) * weight;
    target(r) = 1.0;  // y * weight
  }
  Eigen::VectorXd solution = design.colPivHouseholderQr().solve(target);
  Candidate candidate;
  int column = 0;
  candidate.a = solution(column++);
  if (terms.contention) candidate.b = solution(column++);
  if (terms.coherence) candidate.c = solution(column++);
  // Admissible: a positive one-worker latency, non-negative sigma and kappa.
  constexpr double kTiny = -1e-12;
  candidate.ok = std::isfinite(candidate.a) && candidate.a > 0 && candidate.b >= kTiny &&
                 candidate.c >= kTiny && std::isfinite(candidate.b) && std::isfinite(candidate.c);
  candidate.b = std::max(0.0, candidate.b);
  candidate.c = std::max(0.0, candidate.c);
  if (candidate.ok) candidate.rms = RelativeRms(points, candidate.a, candidate.b, candidate.c);
  return candidate;
}

}  // namespace

double UslFit::Slowdown(double parallelism) const {
  double p = parallelism;
  return 1.0 + sigma * (p - 1.0) + kappa * p * (p - 1.0);
}

double UslFit::Throughput(double parallelism) const {
  if (kind == ScalingKind::kNone) return 0.0;
  return lambda * parallelism / Slowdown(parallelism);
}

double UslFit::PeakParallelism() const {
  if (kappa <= 0) return std::numeric_limits<double>::infinity();
  return std::max(1.0, std::sqrt(std::max(0.0, 1.0 - sigma) / kappa));
}

std::string UslFit::Describe() const {
  switch (kind) {
    case ScalingKind::kNone:
      return "no data";
    case ScalingKind::kLinear:
      return levels >= 2 ? fmt::format("linear (fitted over {} levels)", levels) : "linear (assumed)";
    case ScalingKind::kAmdahl:
      return fmt::format("Amdahl: sigma {:.3g} ({} levels)", sigma, levels);
    case ScalingKind::kUsl:
      return fmt::format("USL: sigma {:.3g}, kappa {:.3g} ({} levels)", sigma, kappa, levels);
  }
  return "unknown";
}

UslFit FitUsl(const std::vector<ScalingPoint>& points) {
  std::vector<ScalingPoint> usable;
  std::set<double> levels;
  for (const ScalingPoint& point : points) {
    if (!(point.parallelism >= 1) || !(point.throughput > 0) || !std::isfinite(point.throughput)) continue;
    usable.push_back(point);
    levels.insert(point.parallelism);
  }
  UslFit fit;
  fit.points = usable.size();
  fit.levels = levels.size();
  if (usable.empty()) return fit;

  // Sub-models from the richest the data supports down to linear; the one
  // with the smallest relative error wins, a simpler one on ties.
  std::vector<std::pair<ScalingKind, Terms>> models = {{ScalingKind::kLinear, {false, false}}};
  if (levels.size() >= 2) models.push_back({ScalingKind::kAmdahl, {true, false}});
  if (levels.size() >= 3) {
    models.push_back({ScalingKind::kUsl, {false, true}});
    models.push_back({ScalingKind::kUsl, {true, true}});
  }
  Candidate best;
  ScalingKind best_kind = ScalingKind::kLinear;
  for (const auto& [kind, terms] : models) {
    Candidate candidate = FitTerms(usable, terms);
    if (!candidate.ok) continue;
    // A richer model must earn its parameters: a tenth less relative error,
    // and at least 0.2% of it, or noise around linear scaling would be read
    // as contention.
    if (!best.ok || candidate.rms < std::min(0.9 * best.rms, best.rms - 0.002)) {
      best = candidate;
      best_kind = kind;
    }
  }
  if (!best.ok) return fit;  // cannot happen for positive data; kNone is safe
  fit.lambda = 1.0 / best.a;
  fit.sigma = best.b / best.a;
  fit.kappa = best.c / best.a;
  if (fit.sigma == 0 && fit.kappa == 0) best_kind = ScalingKind::kLinear;
  if (best_kind == ScalingKind::kUsl && fit.kappa == 0) best_kind = ScalingKind::kAmdahl;
  fit.kind = best_kind;
  fit.rms_relative_error = best.rms;
  return fit;
}

}  // namespace pipetune::models

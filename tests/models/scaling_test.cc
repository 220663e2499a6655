#include "pipetune/models/scaling.h"

#include <gtest/gtest.h>

#include <cmath>

namespace pipetune::models {
namespace {

std::vector<ScalingPoint> Usl(double lambda, double sigma, double kappa, std::vector<double> levels) {
  std::vector<ScalingPoint> points;
  for (double p : levels) {
    points.push_back({p, lambda * p / (1 + sigma * (p - 1) + kappa * p * (p - 1))});
  }
  return points;
}

TEST(FitUsl, RecoversKnownParametersFromExactPoints) {
  UslFit fit = FitUsl(Usl(100, 0.05, 0.002, {1, 2, 4, 8, 16, 32}));
  EXPECT_EQ(fit.kind, ScalingKind::kUsl);
  EXPECT_NEAR(fit.lambda, 100, 1e-6);
  EXPECT_NEAR(fit.sigma, 0.05, 1e-8);
  EXPECT_NEAR(fit.kappa, 0.002, 1e-9);
  EXPECT_LT(fit.rms_relative_error, 1e-9);
  EXPECT_EQ(fit.levels, 6u);
  EXPECT_NEAR(fit.PeakParallelism(), std::sqrt(0.95 / 0.002), 1e-6);
}

TEST(FitUsl, RecoversParametersFromNoisyPointsWithinAFewPercent) {
  std::vector<ScalingPoint> points = Usl(250, 0.1, 0.005, {1, 2, 3, 4, 6, 8, 12, 16});
  // +-2% deterministic noise
  for (size_t i = 0; i < points.size(); ++i) points[i].throughput *= (i % 2 == 0) ? 1.02 : 0.98;
  UslFit fit = FitUsl(points);
  EXPECT_EQ(fit.kind, ScalingKind::kUsl);
  for (double p : {1.0, 4.0, 10.0, 16.0}) {
    double truth = 250 * p / (1 + 0.1 * (p - 1) + 0.005 * p * (p - 1));
    EXPECT_NEAR(fit.Throughput(p) / truth, 1.0, 0.04) << "p=" << p;
  }
}

TEST(FitUsl, TwoLevelsGiveAmdahl) {
  UslFit fit = FitUsl(Usl(50, 0.2, 0, {1, 4}));
  EXPECT_EQ(fit.kind, ScalingKind::kAmdahl);
  EXPECT_NEAR(fit.sigma, 0.2, 1e-9);
  EXPECT_EQ(fit.kappa, 0);
  EXPECT_NEAR(fit.Throughput(2), 50 * 2 / 1.2, 1e-6);
}

TEST(FitUsl, LinearPointsStayLinear) {
  UslFit fit = FitUsl(Usl(80, 0, 0, {1, 2, 4, 8}));
  EXPECT_EQ(fit.kind, ScalingKind::kLinear);
  EXPECT_NEAR(fit.Throughput(16), 80 * 16, 1e-6);
  EXPECT_EQ(fit.Describe(), "linear (fitted over 4 levels)");
}

TEST(FitUsl, OneLevelIsLinearAndSaysItIsAssumed) {
  UslFit fit = FitUsl({{2, 100}, {2, 110}});
  EXPECT_EQ(fit.kind, ScalingKind::kLinear);
  EXPECT_NEAR(fit.lambda, 52.5, 0.5);
  EXPECT_EQ(fit.Describe(), "linear (assumed)");
}

TEST(FitUsl, NoUsablePointsGivesNone) {
  EXPECT_EQ(FitUsl({}).kind, ScalingKind::kNone);
  UslFit fit = FitUsl({{0, 10}, {2, 0}, {3, -1}, {1, std::nan("")}});
  EXPECT_EQ(fit.kind, ScalingKind::kNone);
  EXPECT_EQ(fit.Throughput(4), 0);
}

TEST(FitUsl, SuperlinearPointsDoNotGiveNegativeCoefficients) {
  // Faster per worker at higher parallelism (caching effects): no admissible
  // contention; the fit must not invent negative sigma or kappa.
  UslFit fit = FitUsl({{1, 100}, {2, 210}, {4, 440}});
  EXPECT_GE(fit.sigma, 0);
  EXPECT_GE(fit.kappa, 0);
  EXPECT_EQ(fit.kind, ScalingKind::kLinear);
}

}  // namespace
}  // namespace pipetune::models

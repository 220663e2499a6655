// The statistics of the CI gate: did a measure move between the baseline's
// runs and the new runs by more than the smallest change that matters, and is
// that move separated from run-to-run noise?
//
// The shift is estimated on the log scale, so that it is a ratio (+30% means
// the new runs cost 1.3 times the baseline's): the Hodges-Lehmann estimate,
// the median of all pairwise differences log(now_j) - log(base_i), with the
// distribution-free confidence interval that inverts the Mann-Whitney U test
// (Moses' interval: order statistics of the same pairwise differences). No
// normality is assumed, and one outlier run moves neither the estimate nor
// the interval much, which matters on a loaded CI machine.
//
// A change is "beyond tolerance" when the estimate exceeds the tolerance and
// the interval excludes no change at all; with fewer than 2 runs on either
// side there is no interval and the estimate alone decides.
//
// Pure functions: no I/O, no clocks.
#pragma once

#include <cstddef>
#include <vector>

namespace pipetune::workflow {

struct Shift {
  size_t baseline_runs = 0;
  size_t new_runs = 0;
  double baseline_median = 0;
  double new_median = 0;
  // Relative change (ratio - 1) and its confidence interval. With no
  // interval (too few runs) low == high == change.
  double change = 0;
  double low = 0;
  double high = 0;
  double confidence = 0;  // the interval's actual coverage (exact for small samples)
  bool has_interval = false;
};

// Compares positive samples (non-positive values are dropped: a stage with no
// measurable cost has no ratio). `confidence` is the wanted two-sided
// coverage, 0.95 by default; with few runs the widest interval available is
// used. Both sample sets empty after dropping: a Shift with zero runs.
Shift EstimateShift(const std::vector<double>& baseline, const std::vector<double>& now,
                    double confidence = 0.95);

// The new value grew beyond `tolerance` (0.05 = 5%) and the growth is
// separated from noise (the interval's low end is above zero).
bool IncreasedBeyond(const Shift& shift, double tolerance);
// The same for a drop (throughput): the estimate is below -tolerance and the
// interval's high end is below zero.
bool DecreasedBeyond(const Shift& shift, double tolerance);

// Probability that the Mann-Whitney U statistic of samples of sizes m and n
// is <= u under the null hypothesis (no ties), computed exactly by counting.
// Exposed for tests.
double MannWhitneyCdf(size_t m, size_t n, size_t u);

}  // namespace pipetune::workflow

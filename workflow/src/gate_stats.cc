#include "pipetune/workflow/gate_stats.h"

#include <algorithm>
#include <cmath>

#include "pipetune/base/numbers.h"

namespace pipetune::workflow {
namespace {

std::vector<double> PositiveLogs(const std::vector<double>& values) {
  std::vector<double> logs;
  for (double v : values) {
    if (v > 0 && std::isfinite(v)) logs.push_back(std::log(v));
  }
  return logs;
}

// Above this many runs on a side the exact count is replaced by the normal
// approximation of U (the count grows as m * n * m * n).
constexpr size_t kExactLimit = 40;

double NormalCdf(double x) { return 0.5 * std::erfc(-x / std::sqrt(2.0)); }

}  // namespace

double MannWhitneyCdf(size_t m, size_t n, size_t u) {
  if (m == 0 || n == 0) return 1;
  size_t max_u = m * n;
  if (u >= max_u) return 1;
  if (m > kExactLimit || n > kExactLimit) {
    double mean = static_cast<double>(max_u) / 2;
    double sd = std::sqrt(static_cast<double>(m * n * (m + n + 1)) / 12);
    return NormalCdf((static_cast<double>(u) + 0.5 - mean) / sd);
  }
  // ways[i][j][k]: arrangements of i values of one sample and j of the other
  // with U = k; ways(i, j, k) = ways(i-1, j, k-j) + ways(i, j-1, k). Kept as
  // doubles (counts up to C(80, 40) fit with enough precision for a CDF).
  std::vector<std::vector<std::vector<double>>> ways(m + 1, std::vector<std::vector<double>>(n + 1));
  for (size_t i = 0; i <= m; ++i) {
    for (size_t j = 0; j <= n; ++j) {
      std::vector<double>& cell = ways[i][j];
      cell.assign(i * j + 1, 0.0);
      if (i == 0 || j == 0) {
        cell[0] = 1;
        continue;
      }
      for (size_t k = 0; k <= i * j; ++k) {
        double from_i = k >= j && k - j < ways[i - 1][j].size() ? ways[i - 1][j][k - j] : 0.0;
        double from_j = k < ways[i][j - 1].size() ? ways[i][j - 1][k] : 0.0;
        cell[k] = from_i + from_j;
      }
    }
  }
  const std::vector<double>& dist = ways[m][n];
  double total = 0, below = 0;
  for (size_t k = 0; k < dist.size(); ++k) {
    total += dist[k];
    if (k <= u) below += dist[k];
  }
  return below / total;
}

Shift EstimateShift(const std::vector<double>& baseline, const std::vector<double>& now, double confidence) {
  std::vector<double> base_logs = PositiveLogs(baseline);
  std::vector<double> now_logs = PositiveLogs(now);
  Shift shift;
  shift.baseline_runs = base_logs.size();
  shift.new_runs = now_logs.size();
  if (base_logs.empty() || now_logs.empty()) return shift;
  shift.baseline_median = std::exp(Median(base_logs));
  shift.new_median = std::exp(Median(now_logs));

  std::vector<double> diffs;
  diffs.reserve(base_logs.size() * now_logs.size());
  for (double b : base_logs) {
    for (double a : now_logs) diffs.push_back(a - b);
  }
  std::sort(diffs.begin(), diffs.end());
  shift.change = std::exp(Median(diffs)) - 1;
  shift.low = shift.high = shift.change;
  size_t m = base_logs.size(), n = now_logs.size();
  if (m < 2 || n < 2) return shift;

  // Moses: the interval [d(k), d(N+1-k)] (1-based) covers the true shift with
  // probability 1 - 2 P(U <= k-1). Take the largest k whose coverage still
  // reaches `confidence`; when even k = 1 falls short, k = 1 (min to max).
  double alpha_half = (1 - confidence) / 2;
  size_t k = 1;
  while (k < diffs.size() / 2 && MannWhitneyCdf(m, n, k) <= alpha_half) ++k;
  shift.confidence = 1 - 2 * MannWhitneyCdf(m, n, k - 1);
  shift.low = std::exp(diffs[k - 1]) - 1;
  shift.high = std::exp(diffs[diffs.size() - k]) - 1;
  shift.has_interval = true;
  return shift;
}

bool IncreasedBeyond(const Shift& shift, double tolerance) {
  if (shift.baseline_runs == 0 || shift.new_runs == 0) return false;
  return shift.change > tolerance && shift.low > 0;
}

bool DecreasedBeyond(const Shift& shift, double tolerance) {
  if (shift.baseline_runs == 0 || shift.new_runs == 0) return false;
  return shift.change < -tolerance && shift.high < 0;
}

}  // namespace pipetune::workflow

// The exact parallelism search (search.h).
#include "search.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "pipetune/base/check.h"
#include "pipetune/base/size.h"

namespace pipetune::tuner {
namespace {

constexpr double kInfinity = std::numeric_limits<double>::infinity();
// No stage gets more workers than this, whatever the thread budget says.
constexpr int kParallelismCap = 4096;
// Bounds are compared with this relative slack: a target X is itself one of
// the bounds, recomputed by the same arithmetic, so only rounding is forgiven.
constexpr double kRelativeSlack = 1e-12;

std::string Rate(double x) { return fmt::format("{:.4g} outputs/s", x); }

}  // namespace

ParallelismSearch::ParallelismSearch(Candidate& candidate, const Resources& resources)
    : candidate_(candidate), resources_(resources) {}

bool ParallelismSearch::Fits() const {
  return Threads(candidate_) <= resources_.max_threads &&
         Memory(candidate_).Total() <= static_cast<double>(resources_.memory_bytes);
}

Status ParallelismSearch::Prepare() {
  for (PlannedStage& stage : candidate_.stages) {
    if (stage.parallel) stage.parallelism = 1;
  }
  int threads = Threads(candidate_);
  if (threads > resources_.max_threads) {
    return InvalidInput(
        fmt::format("with every stage at one worker the pipeline runs {} threads; the limit is {}", threads,
                    resources_.max_threads));
  }
  models::MemoryEstimate memory = Memory(candidate_);
  if (memory.Total() > static_cast<double>(resources_.memory_bytes)) {
    return InvalidInput(fmt::format(
        "with every knob at its minimum it holds {} of memory ({} cache, {} queues and buffers); "
        "the budget is {}",
        FormatBytes(memory.Total()), FormatBytes(memory.cache), FormatBytes(memory.Total() - memory.cache),
        FormatBytes(static_cast<double>(resources_.memory_bytes))));
  }
  max_parallelism_ = std::min(kParallelismCap, resources_.max_threads - threads + 1);

  models::Configuration config = CandidateConfiguration(candidate_, resources_);
  models::Prediction base = models::Predict(candidate_.profile, config);
  std::vector<bool> searched(candidate_.stages.size(), false);
  for (size_t i = 0; i < candidate_.stages.size(); ++i) {
    const PlannedStage& stage = candidate_.stages[i];
    searched[i] = stage.parallel && !stage.cached && std::isfinite(base.stages[i].concurrency_throughput);
  }
  upper_ = kInfinity;
  for (const models::Bound& bound : base.bounds) {
    if (bound.kind == models::BoundKind::kConcurrency && bound.stage && searched[*bound.stage]) continue;
    if (bound.throughput < upper_) {
      upper_ = bound.throughput;
      upper_name_ = bound.kind == models::BoundKind::kConcurrency && bound.stage
                        ? fmt::format("stage \"{}\"", candidate_.stages[*bound.stage].name)
                        : models::BoundKindName(bound.kind);
    }
  }
  tables_.clear();
  for (size_t i = 0; i < candidate_.stages.size(); ++i) {
    if (!searched[i]) continue;
    Table table;
    table.stage = i;
    int useful = candidate_.stages[i].useful_parallelism;
    int most = useful > 0 ? std::min(useful, max_parallelism_) : max_parallelism_;
    models::Configuration trial = config;
    for (int p = 1; p <= most; ++p) {
      trial.parallelism[i] = p;
      table.bound.push_back(models::Predict(candidate_.profile, trial).stages[i].concurrency_throughput);
    }
    tables_.push_back(std::move(table));
  }
  return Status::Ok();
}

const ParallelismSearch::Table* ParallelismSearch::FindTable(size_t index) const {
  for (const Table& table : tables_) {
    if (table.stage == index) return &table;
  }
  return nullptr;
}

std::vector<size_t> ParallelismSearch::SearchedStages() const {
  std::vector<size_t> stages;
  for (const Table& table : tables_) stages.push_back(table.stage);
  return stages;
}

bool ParallelismSearch::Reaches(size_t index, double x) const {
  const Table* table = FindTable(index);
  if (table == nullptr) return false;
  return std::any_of(table->bound.begin(), table->bound.end(),
                     [x](double bound) { return bound >= x * (1 - kRelativeSlack); });
}

int ParallelismSearch::LeastParallelismFor(size_t index, double x) const {
  const Table* table = FindTable(index);
  if (table == nullptr) return candidate_.stages[index].parallelism;
  for (size_t p = 0; p < table->bound.size(); ++p) {
    if (table->bound[p] >= x * (1 - kRelativeSlack)) return static_cast<int>(p) + 1;
  }
  // Out of reach: the least parallelism within 1% of the best the stage can
  // do, so that a scaling curve that creeps up forever is not chased.
  double best = *std::max_element(table->bound.begin(), table->bound.end());
  for (size_t p = 0; p < table->bound.size(); ++p) {
    if (table->bound[p] >= best * 0.99) return static_cast<int>(p) + 1;
  }
  return 1;
}

bool ParallelismSearch::Assign(double x) {
  bool reachable = true;
  for (const Table& table : tables_) {
    int p = LeastParallelismFor(table.stage, x);
    if (table.bound[static_cast<size_t>(p) - 1] < x * (1 - kRelativeSlack)) reachable = false;
    candidate_.stages[table.stage].parallelism = p;
  }
  return reachable && Fits();
}

std::string ParallelismSearch::DescribeFailure(double x) {
  for (const Table& table : tables_) {
    if (Reaches(table.stage, x)) continue;
    const PlannedStage& stage = candidate_.stages[table.stage];
    auto peak = std::max_element(table.bound.begin(), table.bound.end());
    int peak_workers = static_cast<int>(peak - table.bound.begin()) + 1;
    int size = static_cast<int>(table.bound.size());
    if (peak_workers < size) {
      return fmt::format(
          "stage \"{}\" peaks at {} with {} workers (its fitted scaling: more workers slow it down)",
          stage.name, Rate(*peak), peak_workers);
    }
    if (size < max_parallelism_) {
      return fmt::format(
          "stage \"{}\" gets at most {} workers ({}): by its fitted scaling each one more would add less "
          "than "
          "{:.0f}% of a worker's throughput",
          stage.name, size, Rate(*peak), kMinWorkerGain * 100);
    }
    return fmt::format(
        "stage \"{}\" would need more than {} workers, which the thread limit of {} does not leave",
        stage.name, max_parallelism_, resources_.max_threads);
  }
  Assign(x);
  int threads = Threads(candidate_);
  if (threads > resources_.max_threads) {
    return fmt::format("{} would need {} threads; the limit is {}", Rate(x), threads, resources_.max_threads);
  }
  double memory = Memory(candidate_).Total();
  return fmt::format("{} would need {} of memory; the budget is {}", Rate(x), FormatBytes(memory),
                     FormatBytes(static_cast<double>(resources_.memory_bytes)));
}

double ParallelismSearch::Maximise(double tolerance) {
  std::vector<double> values;
  if (std::isfinite(upper_)) values.push_back(upper_);
  for (const Table& table : tables_) {
    for (double bound : table.bound) {
      if (bound <= upper_) values.push_back(bound);
    }
  }
  std::sort(values.begin(), values.end());
  values.erase(std::unique(values.begin(), values.end()), values.end());
  if (values.empty()) {
    limit_ = "no stage costs anything in the model";
    return kInfinity;
  }
  // The smallest value is reached with every stage at one worker (each
  // stage's bound at 1 is a value, or above U), and that fits: Prepare
  // checked it.
  size_t lo = 0, hi = values.size() - 1;
  PIPETUNE_CHECK(Assign(values[lo]));
  if (Assign(values[hi])) {
    lo = hi;
  } else {
    while (hi - lo > 1) {  // invariant: values[lo] feasible, values[hi] not
      size_t mid = lo + (hi - lo) / 2;
      (Assign(values[mid]) ? lo : hi) = mid;
    }
  }
  double best = values[lo];
  limit_ = lo + 1 < values.size() ? DescribeFailure(values[lo + 1]) : "the " + upper_name_ + " bound";
  // The smallest value within the tolerance is reachable too (monotone).
  auto enough = std::lower_bound(values.begin(), values.end(), best * (1 - tolerance));
  PIPETUNE_CHECK(Assign(enough != values.end() ? std::min(*enough, best) : best));
  return best;
}

int ParallelismSearch::RaiseWithinBudget(size_t index, int parallelism) {
  PlannedStage& stage = candidate_.stages[index];
  int current = stage.parallelism;
  int most = max_parallelism_ + current - 1;
  if (stage.useful_parallelism > 0) most = std::min(most, std::max(current, stage.useful_parallelism));
  for (int p = std::min(parallelism, most); p > current; --p) {
    stage.parallelism = p;
    if (Fits()) return p;
  }
  stage.parallelism = current;
  return current;
}

}  // namespace pipetune::tuner

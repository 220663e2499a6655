// Plumber's and tf.data AUTOTUNE's tuning policies on our model inputs
// (peers.h).
#include "peers.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "pipetune/tuner/plan_builder.h"

namespace pipetune::bench {
namespace {

using models::Op;
using tuner::CacheChoice;
using tuner::CacheKind;
using tuner::Candidate;
using tuner::PlannedStage;

// The LP over cores with linear scaling: maximise X subject to
// sum_i theta_i <= C, theta_i >= X c_i, theta_i <= 1 for sequential stages.
// Its optimum is X = min(C / sum c_i, min over sequential stages 1 / c_i).
double PlumberThroughput(const Candidate& candidate, double cores) {
  double cpu = 0, x = std::numeric_limits<double>::infinity();
  for (size_t i = 0; i < candidate.stages.size(); ++i) {
    if (candidate.stages[i].cached) continue;
    double c = candidate.profile.stages[i].cpu_seconds_per_output;
    cpu += c;
    if (!candidate.stages[i].parallel && c > 0) x = std::min(x, 1.0 / c);
  }
  if (cpu > 0) x = std::min(x, cores / cpu);
  return x;
}

// Ceiling rounding of the LP's cores: p_i = ceil(X c_i), at least 1.
void PlumberParallelism(Candidate& candidate, double x, bool include_cached) {
  for (size_t i = 0; i < candidate.stages.size(); ++i) {
    PlannedStage& stage = candidate.stages[i];
    if (!stage.parallel || (stage.cached && !include_cached)) continue;
    double theta = x * candidate.profile.stages[i].cpu_seconds_per_output;
    stage.parallelism = std::max(1, static_cast<int>(std::ceil(theta - 1e-9)));
  }
}

// Operational analysis (Little's law over the whole pipeline): the outputs
// in flight are X times the time one output takes through the stages.
int64_t PlumberPrefetch(const Candidate& candidate, double x) {
  double response = 0;
  for (size_t i = 0; i < candidate.stages.size(); ++i) {
    if (candidate.stages[i].cached) continue;
    const models::StageProfile& stage = candidate.profile.stages[i];
    int p = candidate.stages[i].parallel ? candidate.stages[i].parallelism : 1;
    response += stage.visit_ratio * stage.latency_seconds / p;
  }
  double buffer = std::isfinite(x) ? std::ceil(x * response) : 1;
  return std::clamp<int64_t>(static_cast<int64_t>(buffer), 1, 1 << 16);
}

// The highest (latest) admissible stage whose epoch fits in 0.9 x free memory.
CacheChoice PlumberCache(const tuner::TuneInput& input, const tuner::Resources& resources) {
  CacheChoice best;
  double limit = 0.9 * static_cast<double>(resources.memory_bytes);
  for (const CacheChoice& choice : tuner::CacheChoices(input, resources, nullptr)) {
    if (choice.kind != CacheKind::kMemory) continue;
    std::optional<double> bytes = models::CacheBytes(input.profile, choice.after);
    if (!bytes || *bytes >= limit) continue;
    if (best.kind == CacheKind::kNone || choice.after > best.after) best = choice;
  }
  return best;
}

struct Knob {
  size_t stage;
  bool parallelism;  // else the buffer of a prefetch stage
};

// tf.data's per-element time of each stage, the slowest setting the pipeline's.
double ProducerSeconds(const Candidate& candidate) {
  double slowest = 0;
  for (size_t i = 0; i < candidate.stages.size(); ++i) {
    const models::StageProfile& stage = candidate.profile.stages[i];
    int p = candidate.stages[i].parallel ? candidate.stages[i].parallelism : 1;
    slowest = std::max(slowest, stage.visit_ratio * stage.latency_seconds / p);
  }
  return slowest;
}

double ModelledOutputTime(const Candidate& candidate, double consumer_seconds) {
  const PlannedStage& last = candidate.stages.back();
  return AutotuneWaitTime(ProducerSeconds(candidate), consumer_seconds,
                          static_cast<double>(last.buffer.value_or(1)));
}

// Bytes the knobs buffer: prefetch buffers, and a parallel stage's own buffer
// of one element per worker (tf.data's parallel map keeps `parallelism` ready).
double BufferedBytes(const Candidate& candidate) {
  double bytes = 0;
  for (const PlannedStage& stage : candidate.stages) {
    if (stage.op == Op::kPrefetch)
      bytes += static_cast<double>(stage.buffer.value_or(1)) * stage.bytes_per_element;
    if (stage.parallel) bytes += stage.parallelism * stage.bytes_per_element;
  }
  return bytes;
}

int TotalParallelism(const Candidate& candidate) {
  int total = 0;
  for (const PlannedStage& stage : candidate.stages) total += stage.parallel ? stage.parallelism : 0;
  return total;
}

void Increment(Candidate& candidate, const Knob& knob, int delta) {
  PlannedStage& stage = candidate.stages[knob.stage];
  if (knob.parallelism) {
    stage.parallelism += delta;
  } else {
    stage.buffer = stage.buffer.value_or(1) + delta;
  }
}

}  // namespace

double AutotuneWaitTime(double producer_seconds, double consumer_seconds, double buffer) {
  // tf.data model.cc, ComputeWaitTime: with x the consumer's and y the
  // producer's time per element and n the buffer, the chance the buffer is
  // empty is 1 / (n + 1) when x = y, else (1 - x/y) / (1 - (x/y)^(n+1)); the
  // consumer waits that times y per element.
  if (producer_seconds <= 0) return 0;
  if (consumer_seconds <= 0 || buffer <= 0) return producer_seconds;
  double empty;
  if (std::abs(consumer_seconds - producer_seconds) < 1e-15) {
    empty = 1.0 / (buffer + 1);
  } else {
    double ratio = consumer_seconds / producer_seconds;
    empty = (1 - ratio) / (1 - std::pow(ratio, buffer + 1));
  }
  return std::clamp(empty, 0.0, 1.0) * producer_seconds;
}

StatusOr<tuner::Plan> PlumberPlan(const tuner::TuneInput& input, const tuner::Resources& resources) {
  CacheChoice cache = PlumberCache(input, resources);
  PIPETUNE_ASSIGN_OR_RETURN(Candidate candidate, tuner::MakeCandidate(input, resources, cache));
  // Cached stages keep the allocation of the uncached LP, so the first epoch
  // is filled at Plumber's own pace.
  if (cache.kind != CacheKind::kNone) {
    PIPETUNE_ASSIGN_OR_RETURN(Candidate uncached, tuner::MakeCandidate(input, resources, CacheChoice{}));
    PlumberParallelism(uncached, PlumberThroughput(uncached, resources.cores), true);
    for (PlannedStage& stage : candidate.stages) {
      for (const PlannedStage& fill : uncached.stages) {
        if (stage.cached && stage.name == fill.name) stage.parallelism = fill.parallelism;
      }
    }
  }
  double x = PlumberThroughput(candidate, resources.cores);
  PlumberParallelism(candidate, x, false);
  candidate.stages.back().buffer = PlumberPrefetch(candidate, x);
  tuner::Plan plan = tuner::PlanFromCandidate(input, resources, tuner::Objective::kMax, candidate);
  plan.notes.push_back(fmt::format("Plumber's LP: {:.4g} outputs/s", x));
  return plan;
}

StatusOr<tuner::Plan> AutotunePlan(const tuner::TuneInput& input, const tuner::Resources& resources) {
  PIPETUNE_ASSIGN_OR_RETURN(Candidate candidate, tuner::MakeCandidate(input, resources, CacheChoice{}));
  std::vector<Knob> knobs;
  for (size_t i = 0; i < candidate.stages.size(); ++i) {
    if (candidate.stages[i].parallel) knobs.push_back({i, true});
    if (candidate.stages[i].op == Op::kPrefetch) knobs.push_back({i, false});
  }
  double consumer = input.profile.step_time_seconds.value_or(0);
  double ram_budget = static_cast<double>(resources.memory_bytes);
  for (int step = 0; step < 100000; ++step) {
    double now = ModelledOutputTime(candidate, consumer);
    bool cpu_budget_reached = TotalParallelism(candidate) >= resources.cores;
    const Knob* best = nullptr;
    double best_time = now;
    for (const Knob& knob : knobs) {
      if (knob.parallelism && cpu_budget_reached) continue;
      Increment(candidate, knob, +1);
      double time = ModelledOutputTime(candidate, consumer);
      bool fits = BufferedBytes(candidate) <= ram_budget;
      Increment(candidate, knob, -1);
      if (fits && time < best_time) {
        best_time = time;
        best = &knob;
      }
    }
    // No knob helps by at least 0.1%: the climb has converged.
    if (best == nullptr || best_time > now * (1 - 1e-3)) break;
    Increment(candidate, *best, +1);
  }
  tuner::Plan plan = tuner::PlanFromCandidate(input, resources, tuner::Objective::kMax, candidate);
  plan.notes.push_back(fmt::format("AUTOTUNE's modelled output time: {:.3g} ms",
                                   ModelledOutputTime(candidate, consumer) * 1e3));
  return plan;
}

}  // namespace pipetune::bench

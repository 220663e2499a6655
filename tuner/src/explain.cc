// Reasons for each knob of a plan (explain.h).
#include "explain.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "pipetune/base/size.h"

namespace pipetune::tuner {
namespace {

using models::Op;

std::string Ms(double seconds) { return fmt::format("{:.3g} ms", seconds * 1e3); }
std::string Rate(double x) { return fmt::format("{:.4g}/s", x); }
std::string Workers(int n) { return fmt::format("{} worker{}", n, n == 1 ? "" : "s"); }

std::string ScalingNote(const models::StageProfile& stage) {
  if (stage.scaling.kind != models::ScalingKind::kAmdahl && stage.scaling.kind != models::ScalingKind::kUsl) {
    return "";
  }
  return fmt::format("; scaling fitted: {}", stage.scaling.Describe());
}

std::string ParallelismReason(const Candidate& candidate, size_t i, const models::Prediction& prediction,
                              const ExplainFacts& facts, bool binding) {
  const PlannedStage& planned = candidate.stages[i];
  const models::StageProfile& stage = candidate.profile.stages[i];
  if (planned.cached) {
    auto fill = facts.fill_parallelism.find(planned.name);
    bool as_wanted = fill != facts.fill_parallelism.end() && fill->second == planned.parallelism;
    return fmt::format(
        "cached after the first epoch: {}, only to fill the cache{}", Workers(planned.parallelism),
        as_wanted ? ", as fast as the plan without a cache would run" : " (what the budgets leave)");
  }
  if (stage.latency_seconds <= 0) return "the traced window saw no elements here: left as it was";
  double x = facts.throughput;
  double busy = x * stage.visit_ratio * stage.latency_seconds;  // Little's law: workers busy at X
  double utilisation = prediction.stages[i].utilisation;
  std::string head;
  if (stage.latency_bound) {
    head = fmt::format(
        "latency-bound ({} per element, {} of it CPU): Little's law gives {:.1f} busy workers at {}",
        Ms(stage.latency_seconds), Ms(stage.cpu_seconds_per_element), busy, Rate(x));
  } else {
    head = fmt::format("CPU-bound ({} of CPU per element, {:.2f} cores at {})",
                       Ms(stage.cpu_seconds_per_element), prediction.stages[i].cores_used, Rate(x));
  }
  std::string tail = fmt::format("; {} {} {:.0f}% busy", Workers(planned.parallelism),
                                 planned.parallelism == 1 ? "is" : "are", utilisation * 100);
  if (binding && !facts.limit.empty()) tail += fmt::format("; it binds: {}", facts.limit);
  return head + tail + ScalingNote(stage);
}

std::string CacheReason(const TuneInput& input, const Candidate& candidate, const PlannedStage& cache,
                        const Resources& resources) {
  double cpu = 0, latency = 0;
  for (size_t i = 0; i < candidate.stages.size() && candidate.stages[i].cached; ++i) {
    cpu += candidate.profile.stages[i].cpu_seconds_per_output;
    latency = std::max(latency,
                       candidate.profile.stages[i].latency_seconds * candidate.profile.stages[i].visit_ratio);
  }
  std::string where =
      !cache.location || cache.location->in_memory()
          ? fmt::format("memory ({} of the {} budget)", FormatBytes(cache.cache_bytes),
                        FormatBytes(static_cast<double>(resources.memory_bytes)))
          : fmt::format("{} on disk in {}", FormatBytes(cache.cache_bytes), cache.location->directory);
  const std::string& after = input.profile.stages[candidate.choice.after].name;
  return fmt::format(
      "after the first epoch it replays \"{}\"'s output, saving {} of CPU per output; it holds {}", after,
      Ms(cpu), where);
}

std::string LastBufferReason(const ExplainFacts& facts, const PlannedStage& stage) {
  std::string reason = facts.last_buffer.reason;
  if (facts.last_buffer_capped_by_memory) {
    reason += fmt::format("; the memory budget leaves room for {}", stage.buffer.value_or(1));
  }
  return reason;
}

std::string BindingReason(const Plan& plan, const Resources& resources, const ExplainFacts& facts,
                          const TuneInput& input) {
  switch (plan.binding) {
    case models::BoundKind::kCpu:
      return fmt::format("the CPU: {:.2f} of {:.4g} cores busy", plan.cores_used, resources.cores);
    case models::BoundKind::kConcurrency:
      return fmt::format("stage \"{}\": {}", plan.binding_stage.value_or("?"),
                         facts.limit.empty() ? "its workers are all busy" : facts.limit);
    case models::BoundKind::kStorage:
      return "the storage bandwidth";
    case models::BoundKind::kDemand:
      return fmt::format("the consumer: it takes {:.4g} outputs/s ({} steps)",
                         plan.demand_throughput.value_or(0), Ms(input.profile.step_time_seconds.value_or(0)));
    case models::BoundKind::kConsumer:
    case models::BoundKind::kStartup:
      return models::BoundKindName(plan.binding);  // only worker-group plans (worker_groups.cc) meet these
  }
  return "";
}

}  // namespace

void ExplainPlan(const TuneInput& input, const Resources& resources, const Candidate& candidate,
                 const ExplainFacts& facts, Plan& plan) {
  models::Prediction prediction = Evaluate(candidate, resources);
  for (KnobChange& knob : plan.knobs) {
    auto found = std::find_if(candidate.stages.begin(), candidate.stages.end(),
                              [&](const PlannedStage& s) { return s.name == knob.stage; });
    if (found == candidate.stages.end()) {  // a removed stage
      knob.reason = facts.moved_cache_reason.value_or("removed");
      continue;
    }
    size_t i = static_cast<size_t>(found - candidate.stages.begin());
    const PlannedStage& stage = *found;
    bool binding =
        prediction.binding.kind == models::BoundKind::kConcurrency && prediction.binding.stage == i;
    bool last = i + 1 == candidate.stages.size();
    if (knob.knob == Knob::kParallelism) {
      knob.reason = ParallelismReason(candidate, i, prediction, facts, binding);
    } else if (knob.knob == Knob::kBuffer) {
      knob.reason =
          last ? LastBufferReason(facts, stage)
               : (knob.changed ? "shrunk to what the memory budget leaves" : "inside the pipeline: kept");
    } else if (knob.knob == Knob::kLocation) {
      knob.reason =
          knob.changed ? CacheReason(input, candidate, stage, resources) : "kept where the run had it";
    } else if (knob.knob == Knob::kStage && stage.op == Op::kPrefetch) {
      knob.reason =
          fmt::format("nothing buffered the outputs for the consumer; {}", LastBufferReason(facts, stage));
    } else if (knob.knob == Knob::kStage && stage.op == Op::kCache) {
      knob.reason = CacheReason(input, candidate, stage, resources);
    } else if (knob.knob == Knob::kStage && stage.op == Op::kShuffle && stage.inserted()) {
      knob.reason = fmt::format(
          "the run drew a new order every epoch and the cache replays one: a shuffle of the whole epoch "
          "({} elements) draws a new one each pass",
          stage.args.value("buffer", int64_t{0}));
    }
  }
  plan.binding_reason = BindingReason(plan, resources, facts, input);
}

}  // namespace pipetune::tuner

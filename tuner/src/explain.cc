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

// "4 workers x 8 fetch threads: each fetch waits 25 ms on storage and uses
// 0.4 ms of CPU", from the per-sample stages' latency and CPU.
std::string FetchThreadsReason(const models::WorkerGroup& traced, const PlannedGroup& group) {
  std::string who = group.workers > 0
                        ? fmt::format("{} worker{}", group.workers, group.workers == 1 ? "" : "s")
                        : std::string("the main process");
  if (group.fetch_threads == 1) return who + " reading samples one at a time: its fetches hardly wait";
  const double cpu_ms = traced.fetch_cpu_seconds_per_sample * 1e3,
               gil_ms = traced.fetch_gil_seconds_per_sample * 1e3;
  std::string reason =
      fmt::format("{} x {} fetch threads: each fetch waits {:.3g} ms on storage and uses {:.2g} ms of CPU",
                  who, group.fetch_threads, traced.fetch_wait_seconds_per_sample * 1e3, cpu_ms);
  // Where the probe measured less GIL than CPU, the CPU outside it overlaps too.
  if (gil_ms < cpu_ms * 0.95) reason += fmt::format(", {:.2g} ms of it holding the GIL", gil_ms);
  return reason;
}

// A worker group's or switchable stage's knob (Knob::kNamed), by the name
// it has in the profile.
std::string NamedReason(const Candidate& candidate, const models::Prediction& prediction,
                        const Resources& resources, const KnobChange& knob) {
  const models::Profile& profile = candidate.profile;
  for (size_t g = 0; g < candidate.groups.size(); ++g) {
    const models::WorkerGroup& traced = profile.groups[g];
    const PlannedGroup& group = candidate.groups[g];
    if (knob.stage == traced.workers_knob) {
      if (group.workers == 0)
        return "the consumer's thread keeps up with the input stages: workers would only cost memory";
      if (traced.max_workers > 0 && group.workers == traced.max_workers)
        return fmt::format("no more than the stream's shards: {}", traced.max_workers_reason);
      if (prediction.binding.kind == models::BoundKind::kCpu)
        return fmt::format("enough workers to keep the {:.4g} cores busy", resources.cores);
      return fmt::format("the fewest workers that reach {:.4g} outputs/s", prediction.throughput);
    }
    if (knob.stage == traced.fetch_threads_knob) return FetchThreadsReason(traced, group);
    if (knob.stage == traced.buffer_knob) {
      int in_flight = group.workers * group.buffer_per_worker;
      return fmt::format("{} outputs in flight ({} of memory)", in_flight,
                         FormatBytes(in_flight * profile.stages[traced.last_stage].bytes_per_element));
    }
    if (knob.stage == traced.persistent_knob) {
      if (!group.persistent) return "one epoch only: start-up is paid once anyway";
      return fmt::format("workers start once, not every epoch ({:.3f} s for {})",
                         traced.startup_seconds_fixed + group.workers * traced.startup_seconds_per_worker,
                         group.workers);
    }
  }
  for (size_t i = 0; i < candidate.stages.size(); ++i) {
    if (!profile.stages[i].switchable || knob.stage != profile.stages[i].switch_knob) continue;
    return knob.changed ? fmt::format("{} only costs time here", profile.stages[i].name) : "kept";
  }
  return knob.reason;
}

// What a plan with worker groups needs said beside its knobs: a memory
// budget or thread limit that stops more workers, and from what epoch length the predicted
// rate (paid start-up over epochs as traced) is the steady one.
void AddGroupNotes(const Candidate& candidate, const models::Prediction& prediction,
                   const ExplainFacts& facts, Plan& plan) {
  if (candidate.groups.empty()) return;
  int workers = candidate.groups[0].workers;
  double beaten = plan.predicted_throughput * (1 + facts.tie_tolerance);
  const models::WorkerGroup& traced = candidate.profile.groups[0];
  if (facts.past_worker_limit_throughput > beaten) {
    plan.binding_reason = fmt::format(
        "the stream's shards: {} workers at most, since {} ({} workers would reach {:.4g} outputs/s with as "
        "many shards)",
        workers, traced.max_workers_reason, facts.past_worker_limit_workers,
        facts.past_worker_limit_throughput);
    plan.notes.push_back(fmt::format(
        "the stream's {} shards bind: split it into {} or more shards and {} workers would reach {:.4g} "
        "outputs/s",
        traced.max_workers, facts.past_worker_limit_workers, facts.past_worker_limit_workers,
        facts.past_worker_limit_throughput));
  } else if (facts.over_memory_throughput > beaten) {
    std::string budget = FormatBytes(static_cast<double>(plan.resources.memory_bytes));
    plan.binding_reason =
        fmt::format("the memory budget: {} workers fit in {} ({:.4g} outputs/s would need more)", workers,
                    budget, facts.over_memory_throughput);
    plan.notes.push_back(fmt::format(
        "memory binds: more workers would reach {:.4g} outputs/s but need more than the {} budget",
        facts.over_memory_throughput, budget));
  } else if (facts.over_threads_throughput > beaten) {
    plan.binding_reason = fmt::format(
        "the thread limit: {} workers and the consumer fit in {} ({:.4g} outputs/s would need more)", workers,
        plan.resources.max_threads, facts.over_threads_throughput);
    plan.notes.push_back(fmt::format(
        "the thread limit binds: more workers would reach {:.4g} outputs/s but need more than {} threads",
        facts.over_threads_throughput, plan.resources.max_threads));
  }
  const std::optional<double>& epoch = candidate.profile.outputs_per_epoch;
  if (double steady_from = models::EpochOutputsForSteadyRate(prediction); steady_from > 0 && epoch) {
    plan.notes.push_back(fmt::format(
        "predicted for epochs of {:.0f} outputs as traced: {} workers' start-up ({:.2f} s) and each epoch's "
        "fill and drain ({:.2f} s) included; the steady {:.4g} outputs/s holds within 5% from epochs of "
        "{:.0f} outputs",
        *epoch, workers, prediction.startup_seconds_per_epoch, prediction.epoch_end_seconds,
        prediction.steady_throughput, steady_from));
  }
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
      return fmt::format("the consumer's thread: its step and the stages it runs itself{}",
                         plan.binding_stage ? fmt::format(", stage \"{}\" most", *plan.binding_stage) : "");
    case models::BoundKind::kStartup:
      return "worker start-up: it takes most of each epoch";
  }
  return "";
}

}  // namespace

void ExplainPlan(const TuneInput& input, const Resources& resources, const Candidate& candidate,
                 const ExplainFacts& facts, Plan& plan) {
  models::Prediction prediction = Evaluate(candidate, resources);
  for (KnobChange& knob : plan.knobs) {
    if (knob.knob == Knob::kNamed) {
      knob.reason = NamedReason(candidate, prediction, resources, knob);
      continue;
    }
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
  AddGroupNotes(candidate, prediction, facts, plan);
}

}  // namespace pipetune::tuner

// Profile + budgets + objective -> plan (solver.h).
#include "pipetune/tuner/solver.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <map>
#include <memory>
#include <utility>
#include <vector>

#include "explain.h"
#include "pipetune/base/check.h"
#include "pipetune/base/size.h"
#include "pipetune/tuner/plan_builder.h"
#include "search.h"

namespace pipetune::tuner {
namespace {

using models::Op;

// The cores a plan needs at a prediction: whole cores, within the budget.
int CoresNeeded(double cores, const Resources& resources) {
  return std::max(1, static_cast<int>(std::ceil(std::min(cores, resources.cores) - 1e-9)));
}

// Everything the solver worked out for one alternative: a cache choice, or a
// worker group's setting.
struct Solved {
  CacheOption option;
  bool offered = true;                   // listed among the plan's cache options (a group's settings are not)
  std::array<int, 5> departure{};        // from the traced settings (Departure)
  std::unique_ptr<Candidate> candidate;  // null: not admissible or nothing fits
  double best = 0;                       // the exact optimum X of this choice
  double sized_for = 0;                  // the X the parallelism is sized for
  bool meets_demand = false;
  std::string limit;
  models::PrefetchSizing last_buffer;
  bool last_buffer_capped = false;
  int cores_needed = 0;
  double memory = 0;
  int threads = 0;
};

Status CheckResources(const Resources& resources) {
  if (!(resources.cores > 0)) return InvalidInput("the core budget must be > 0");
  if (resources.memory_bytes == 0) return InvalidInput("the memory budget must be > 0");
  if (resources.max_threads < 1) return InvalidInput("the thread limit must be >= 1");
  return Status::Ok();
}

std::optional<double> Demand(const TuneInput& input) {
  const std::optional<double>& step = input.profile.step_time_seconds;
  if (!step || *step <= 0) return std::nullopt;
  return 1.0 / *step;
}

// CPU-seconds per output of the stages the cache does not replace.
double CpuPerOutput(const Candidate& candidate) {
  double cpu = 0;
  for (size_t i = 0; i < candidate.stages.size(); ++i) {
    if (!candidate.stages[i].cached) cpu += candidate.profile.stages[i].cpu_seconds_per_output;
  }
  return cpu;
}

// Stages the window never saw work keep the workers they had: the model has
// nothing to size them by.
void KeepUnmeasured(Candidate& candidate, ParallelismSearch& search) {
  for (size_t i = 0; i < candidate.stages.size(); ++i) {
    PlannedStage& stage = candidate.stages[i];
    if (stage.parallel && !stage.cached && candidate.profile.stages[i].latency_seconds <= 0) {
      search.RaiseWithinBudget(i, stage.old_parallelism);
    }
  }
}

// Headroom: no searched stage busier than its utilisation target at X, the
// stages needing the most workers first, as far as threads and memory allow.
// CPU-bound stages get the lower target when the cores bind, latency-bound
// ones always (SolverOptions).
void AddHeadroom(Candidate& candidate, ParallelismSearch& search, double x, const SolverOptions& options) {
  bool cpu_binds = Evaluate(candidate, search.resources()).binding.kind == models::BoundKind::kCpu;
  std::vector<std::pair<int, size_t>> order;  // (-p needed, stage): most workers needed first
  for (size_t i : search.SearchedStages()) {
    bool cpu_bound = !candidate.profile.stages[i].latency_bound;
    double utilisation = !cpu_bound  ? options.latency_bound_utilisation_target
                         : cpu_binds ? options.cpu_bound_utilisation_target
                                     : options.utilisation_target;
    double target = x / utilisation;
    // A stage that cannot reach the target at all gets no headroom: its
    // curve has flattened, and more workers would buy next to nothing.
    if (!search.Reaches(i, target)) continue;
    order.push_back({-search.LeastParallelismFor(i, target), i});
  }
  std::sort(order.begin(), order.end());
  for (auto [negative, i] : order) search.RaiseWithinBudget(i, -negative);
}

// Cached stages only fill the cache; give them the workers the uncached plan
// had, so that the first epoch is not slower than without a cache.
void AddFillWorkers(Candidate& candidate, ParallelismSearch& search, const std::map<std::string, int>& fill) {
  for (size_t i = 0; i < candidate.stages.size(); ++i) {
    const PlannedStage& stage = candidate.stages[i];
    if (!stage.parallel || !stage.cached) continue;
    auto found = fill.find(stage.name);
    int wanted = found != fill.end() ? found->second : stage.old_parallelism;
    search.RaiseWithinBudget(i, wanted);
  }
}

// Elements of `bytes` each that fit in what the memory budget has left, on
// top of the one a buffer already counts.
int64_t ElementsThatFit(const Candidate& candidate, const Resources& resources, double bytes) {
  double left = static_cast<double>(resources.memory_bytes) - Memory(candidate).Total();
  if (bytes <= 0) return std::numeric_limits<int32_t>::max();
  return std::max<int64_t>(0, static_cast<int64_t>(std::floor(left / bytes)));
}

// Prefetch depths: the ones inside the pipeline keep their value where it
// fits; the last one follows the queue model, within what memory is left.
void SizeBuffers(Candidate& candidate, const TuneInput& input, const Resources& resources,
                 const SolverOptions& options, Solved& solved) {
  for (size_t i = 0; i + 1 < candidate.stages.size(); ++i) {
    PlannedStage& stage = candidate.stages[i];
    if (stage.op != Op::kPrefetch) continue;
    int64_t wanted = stage.old_buffer.value_or(1);
    stage.buffer = 1 + std::min(wanted - 1, ElementsThatFit(candidate, resources, stage.bytes_per_element));
  }
  PlannedStage& last = candidate.stages.back();
  PIPETUNE_CHECK(last.op == Op::kPrefetch);
  models::Configuration unconstrained = CandidateConfiguration(candidate, resources);
  unconstrained.step_time_seconds.reset();
  models::PrefetchQuery query;
  query.producer_throughput = models::Predict(candidate.profile, unconstrained).throughput;
  query.step_seconds = input.profile.step_time_seconds;
  query.arrival_cv = input.output_spread ? input.output_spread->cv : 1.0;
  query.stall_probability = options.stall_probability;
  query.max_buffer = options.max_prefetch_buffer;
  solved.last_buffer = models::SizePrefetch(query);
  last.buffer = 1;
  int64_t room = 1 + ElementsThatFit(candidate, resources, last.bytes_per_element);
  last.buffer = std::min(solved.last_buffer.buffer, room);
  solved.last_buffer_capped = room < solved.last_buffer.buffer;
}

Solved SolveChoice(const TuneInput& input, const Resources& resources, Objective objective,
                   const SolverOptions& options, const CacheChoice& choice,
                   const std::map<std::string, int>& fill) {
  Solved solved;
  solved.option.choice = choice;
  solved.option.description = DescribeChoice(input, choice);
  StatusOr<Candidate> made = MakeCandidate(input, resources, choice);
  if (!made.ok()) {
    solved.option.note = made.status().message();
    return solved;
  }
  auto candidate = std::make_unique<Candidate>(std::move(made).value());
  ParallelismSearch search(*candidate, resources);
  Status prepared = search.Prepare();
  if (!prepared.ok()) {
    solved.option.note = prepared.message();
    return solved;
  }
  double best = search.Maximise(options.throughput_tolerance);
  solved.best = best;
  solved.limit = search.limit();
  solved.sized_for = best;
  std::optional<double> demand = Demand(input);
  solved.meets_demand = demand && best >= *demand * (1 - 1e-9);
  if (objective == Objective::kDemand && solved.meets_demand) {
    solved.sized_for = std::min(*demand / options.utilisation_target, best);
    PIPETUNE_CHECK(search.Assign(solved.sized_for));
  }
  if (options.spend_leftover_budget) {
    KeepUnmeasured(*candidate, search);
    if (objective == Objective::kMax || !solved.meets_demand) {
      AddHeadroom(*candidate, search, best, options);
      solved.sized_for = std::isfinite(best) ? best / options.utilisation_target : best;
    }
    AddFillWorkers(*candidate, search, fill);
    SizeBuffers(*candidate, input, resources, options, solved);
  }
  PIPETUNE_CHECK(search.Fits());

  models::Prediction prediction = Evaluate(*candidate, resources);
  // Demand: the cores for the rate the workers were sized for (demand plus
  // headroom); otherwise the cores the predicted throughput keeps busy.
  double cores = prediction.cores_used;
  if (objective == Objective::kDemand && solved.meets_demand) {
    cores = solved.sized_for * CpuPerOutput(*candidate) + candidate->profile.other_cpu_cores;
  }
  solved.cores_needed = CoresNeeded(cores, resources);
  solved.memory = Memory(*candidate).Total();
  solved.threads = Threads(*candidate);
  solved.option.feasible = true;
  solved.option.throughput = prediction.throughput;
  solved.option.cores_needed = solved.cores_needed;
  solved.option.memory_bytes = solved.memory;
  solved.option.note = solved.limit;
  solved.candidate = std::move(candidate);
  return solved;
}

// What the settings past the group's worker limit (a stream's shards) would
// reach if each of their workers had work, as if the stream were split
// into more shards: priced by the same model without the limit, within the
// budgets, so that the plan can say what the limit costs. Not an
// alternative: the run cannot have it without changing its data.
void PricePastWorkerLimit(const Candidate& traced, const Resources& resources, const SolverOptions& options,
                          ExplainFacts& facts) {
  const int limit = traced.profile.groups[0].max_workers;
  if (limit <= 0 || limit >= options.max_group_workers) return;
  Candidate unlimited = traced;
  unlimited.profile.groups[0].max_workers = 0;
  std::vector<std::pair<int, double>> reached;  // (workers, throughput)
  double best = 0;
  for (Candidate& setting : GroupSettings(unlimited, options.max_group_workers)) {
    if (setting.groups[0].workers <= limit || Threads(setting) > resources.max_threads ||
        Memory(setting).Total() > static_cast<double>(resources.memory_bytes))
      continue;
    double x = Evaluate(setting, resources).throughput;
    reached.push_back({setting.groups[0].workers, x});
    best = std::max(best, x);
  }
  for (auto [workers, x] : reached) {  // in order of workers: the first within the tolerance
    if (x >= best * (1 - options.tie_tolerance)) {
      facts.past_worker_limit_throughput = best;
      facts.past_worker_limit_workers = workers;
      return;
    }
  }
}

// A worker group's settings, each priced as it is: its throughput is the
// model's over an epoch as traced (start-up included), and a setting over
// the memory or thread budget is no alternative; `facts` gets the best
// throughput such settings would reach, per budget.
StatusOr<std::vector<Solved>> SolveGroupSettings(const TuneInput& input, const Resources& resources,
                                                 const SolverOptions& options, ExplainFacts& facts) {
  PIPETUNE_ASSIGN_OR_RETURN(Candidate traced, MakeCandidate(input, resources, CacheChoice{}));
  std::optional<double> demand = Demand(input);
  std::vector<Solved> all;
  double least_memory = -1;
  for (Candidate& setting : GroupSettings(traced, options.max_group_workers)) {
    models::Prediction prediction = Evaluate(setting, resources);
    double memory = Memory(setting).Total();
    least_memory = least_memory < 0 ? memory : std::min(least_memory, memory);
    if (memory > static_cast<double>(resources.memory_bytes)) {
      facts.over_memory_throughput = std::max(facts.over_memory_throughput, prediction.throughput);
      continue;
    }
    const int threads = Threads(setting);
    if (threads > resources.max_threads) {
      facts.over_threads_throughput = std::max(facts.over_threads_throughput, prediction.throughput);
      continue;
    }
    Solved solved;
    solved.offered = false;
    solved.departure = Departure(setting);
    solved.best = solved.sized_for = prediction.throughput;
    // The throughput is predicted, not searched for: the tolerance says
    // when it meets the demand, as when it ties.
    solved.meets_demand = demand && prediction.throughput >= *demand * (1 - options.tie_tolerance);
    solved.cores_needed = CoresNeeded(prediction.cores_used, resources);
    solved.memory = memory;
    solved.threads = threads;
    solved.candidate = std::make_unique<Candidate>(std::move(setting));
    all.push_back(std::move(solved));
  }
  PricePastWorkerLimit(traced, resources, options, facts);
  if (all.empty()) {
    return InvalidInput(fmt::format("no setting fits the {} memory budget: the least needs {}",
                                    FormatBytes(static_cast<double>(resources.memory_bytes)),
                                    FormatBytes(least_memory)));
  }
  return all;
}

// The one tie-break: the least departure from the traced settings, then
// fewer cores, then less memory, then fewer threads.
bool Preferred(const Solved& a, const Solved& b) {
  if (a.departure != b.departure) return a.departure < b.departure;
  if (a.cores_needed != b.cores_needed) return a.cores_needed < b.cores_needed;
  if (a.memory != b.memory) return a.memory < b.memory;
  return a.threads < b.threads;
}

const Solved* PickMax(const std::vector<Solved>& all, double tolerance) {
  double best = -1;
  for (const Solved& s : all) {
    if (s.candidate) best = std::max(best, s.best);
  }
  const Solved* chosen = nullptr;
  for (const Solved& s : all) {
    if (!s.candidate) continue;
    bool tied = std::isinf(best) ? std::isinf(s.best) : s.best >= best * (1 - tolerance);
    if (!tied) continue;
    if (chosen == nullptr || Preferred(s, *chosen) || (!Preferred(*chosen, s) && s.best > chosen->best))
      chosen = &s;
  }
  return chosen;
}

const Solved* PickDemand(const std::vector<Solved>& all) {
  const Solved* chosen = nullptr;
  for (const Solved& s : all) {
    if (!s.candidate || !s.meets_demand) continue;
    if (chosen == nullptr || Preferred(s, *chosen)) chosen = &s;
  }
  return chosen;
}

std::string NothingFits(const std::vector<Solved>& all, const std::vector<CacheOption>& rejected) {
  std::string why = "no configuration fits the budgets:";
  for (const Solved& s : all) why += fmt::format("\n  {}: {}", s.option.description, s.option.note);
  for (const CacheOption& r : rejected)
    why += fmt::format("\n  {}: not admissible: {}", r.description, r.note);
  return why;
}

std::optional<std::string> MovedCacheReason(const TuneInput& input, const Resources& resources,
                                            const Solved& chosen) {
  if (chosen.candidate->removed_stages.empty()) return std::nullopt;
  if (chosen.option.choice.kind == CacheKind::kNone && !resources.caches_allowed) {
    return std::string("dropped: caches are off (--no-cache)");
  }
  if (chosen.option.choice.kind == CacheKind::kNone) {
    return std::string("dropped: no cache point pays for its memory within the budgets");
  }
  return fmt::format("replaced by the {}", DescribeChoice(input, chosen.option.choice));
}

// Every cache choice, solved exactly; the cache-less plan first: its
// workers are what cached stages get for filling the cache.
std::vector<Solved> SolveCacheChoices(const TuneInput& input, const Resources& resources, Objective objective,
                                      const SolverOptions& options, std::vector<CacheOption>& rejected,
                                      std::map<std::string, int>& fill) {
  std::vector<CacheChoice> choices = CacheChoices(input, resources, &rejected);
  if (!options.only_cache_after.empty()) {
    std::optional<size_t> point = input.profile.FindStage(options.only_cache_after);
    std::erase_if(choices,
                  [&](const CacheChoice& c) { return c.kind != CacheKind::kNone && c.after != point; });
    std::erase_if(rejected, [&](const CacheOption& r) { return r.choice.after != point; });
  }
  std::vector<Solved> all;
  for (const CacheChoice& choice : choices) {
    Solved solved = SolveChoice(input, resources, objective, options, choice, fill);
    if (choice.kind == CacheKind::kNone && solved.candidate) {
      for (const PlannedStage& stage : solved.candidate->stages) fill[stage.name] = stage.parallelism;
    }
    // The cache-less plan of an alternative made for one cache point is the
    // traced pipeline's again: solved for the fill, not offered.
    if (choice.kind == CacheKind::kNone && !options.only_cache_after.empty()) continue;
    all.push_back(std::move(solved));
  }
  return all;
}

// Without --cache-dir the choices hold no cache on disk. Each point a
// cache may follow is priced again as a disk cache in a stand-in directory
// (the candidates and search a --cache-dir plan uses, kDiskReplaySecondsPerByte
// included); the best is the hint when it beats `plan_throughput` by
// kDiskCacheHintGain. Where the memory cache fits, the plan holds it, and a
// disk cache, which only adds the replay's reads, cannot beat it.
std::optional<DiskCacheHint> DiskCacheHintFor(const TuneInput& input, const Resources& resources,
                                              Objective objective, const SolverOptions& options,
                                              const std::map<std::string, int>& fill,
                                              double plan_throughput) {
  if (resources.disk_cache_dir || !resources.caches_allowed || !input.profile.groups.empty())
    return std::nullopt;
  Resources disk = resources;
  disk.disk_cache_dir = "DIR";
  disk.disk_free_bytes.reset();
  std::optional<DiskCacheHint> hint;
  for (const CacheChoice& choice : CacheChoices(input, disk, nullptr)) {
    if (choice.kind != CacheKind::kDisk) continue;
    if (!options.only_cache_after.empty() &&
        input.profile.FindStage(options.only_cache_after) != choice.after)
      continue;
    Solved solved = SolveChoice(input, disk, objective, options, choice, fill);
    if (!solved.candidate || !std::isfinite(solved.option.throughput)) continue;
    if (solved.option.throughput < plan_throughput * kDiskCacheHintGain) continue;
    if (hint && solved.option.throughput <= hint->throughput) continue;
    hint = DiskCacheHint{input.profile.stages[choice.after].name, solved.option.throughput,
                         solved.option.throughput / plan_throughput,
                         models::CacheBytes(input.profile, choice.after).value_or(0), resources.memory_bytes};
  }
  return hint;
}

}  // namespace

StatusOr<double> MaximiseThroughput(Candidate& candidate, const Resources& resources, double tolerance) {
  PIPETUNE_RETURN_IF_ERROR(CheckResources(resources));
  ParallelismSearch search(candidate, resources);
  PIPETUNE_RETURN_IF_ERROR(search.Prepare());
  return search.Maximise(tolerance);
}

StatusOr<Plan> Solve(const TuneInput& input, const Resources& resources, Objective objective,
                     const SolverOptions& options) {
  PIPETUNE_RETURN_IF_ERROR(CheckResources(resources));
  if (input.profile.stages.empty()) return InvalidInput("the profile has no stages: nothing to tune");
  std::vector<CacheOption> rejected;
  std::map<std::string, int> fill;
  std::vector<Solved> all;
  ExplainFacts facts;
  if (input.profile.groups.empty()) {
    all = SolveCacheChoices(input, resources, objective, options, rejected, fill);
  } else {
    PIPETUNE_ASSIGN_OR_RETURN(all, SolveGroupSettings(input, resources, options, facts));
  }

  std::vector<std::string> notes;
  const Solved* chosen = nullptr;
  std::optional<double> demand = Demand(input);
  if (objective == Objective::kDemand) {
    if (!demand) {
      notes.push_back(
          "the consumer drains as fast as it can, so there is no demand to meet: maximising throughput");
    } else {
      chosen = PickDemand(all);
      if (chosen == nullptr) {
        notes.push_back(
            fmt::format("the consumer's demand of {:.4g} outputs/s cannot be met within the budgets: "
                        "maximising throughput",
                        *demand));
      }
    }
  }
  if (chosen == nullptr) chosen = PickMax(all, options.tie_tolerance);
  if (chosen == nullptr) return InvalidInput(NothingFits(all, rejected));

  Plan plan = PlanFromCandidate(input, resources, objective, *chosen->candidate);
  plan.cores_needed = chosen->cores_needed;
  for (const Solved& s : all) {
    if (!s.offered) continue;
    plan.cache_options.push_back(s.option);
    plan.cache_options.back().chosen = &s == chosen;
  }
  for (const CacheOption& r : rejected) plan.cache_options.push_back(r);
  if (plan.predicted_throughput > 0 && std::isfinite(plan.predicted_throughput))
    plan.disk_cache_hint =
        DiskCacheHintFor(input, resources, objective, options, fill, plan.predicted_throughput);
  plan.notes.insert(plan.notes.end(), notes.begin(), notes.end());

  facts.throughput = plan.predicted_throughput;
  facts.sized_for = chosen->sized_for;
  facts.limit = chosen->limit;
  facts.fill_parallelism = fill;
  facts.last_buffer = chosen->last_buffer;
  facts.last_buffer_capped_by_memory = chosen->last_buffer_capped;
  facts.moved_cache_reason = MovedCacheReason(input, resources, *chosen);
  // A budget binds a group's plan only where throughput is what is wanted.
  if (objective != Objective::kMax)
    facts.over_memory_throughput = facts.over_threads_throughput = facts.past_worker_limit_throughput = 0;
  facts.tie_tolerance = options.tie_tolerance;
  ExplainPlan(input, resources, *chosen->candidate, facts, plan);
  return plan;
}

}  // namespace pipetune::tuner

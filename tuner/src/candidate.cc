// The candidate pipelines the solver searches (candidate.h).
#include "pipetune/tuner/candidate.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <set>

#include "pipetune/base/size.h"

namespace pipetune::tuner {
namespace {

using models::Op;

const models::StageConfig* ConfigStage(const TuneInput& input, const std::string& name) {
  if (!input.config) return nullptr;
  std::optional<size_t> index = input.config->FindStage(name);
  return index ? &input.config->stages[*index] : nullptr;
}

// The run's own cache can be moved or dropped only when the window saw the
// stages before it work: after its first epoch they are idle, their cost
// unmeasured, and a plan without the cache could not be predicted.
bool ExistingCacheIsMovable(const models::Profile& profile) {
  if (!profile.cache_stage) return false;
  for (size_t i = 0; i < *profile.cache_stage; ++i) {
    const models::StageProfile& stage = profile.stages[i];
    if (stage.op == Op::kPrefetch) continue;
    if (stage.elements <= 0) return false;
  }
  return true;
}

// Replaying a cache pays off only when a later epoch asks for the data again.
bool RepeatFollows(const TuneInput& input, size_t index) {
  const models::Profile& profile = input.profile;
  for (size_t j = index + 1; j < profile.stages.size(); ++j) {
    if (profile.stages[j].op != Op::kRepeat) continue;
    const models::StageConfig* stage = ConfigStage(input, profile.stages[j].name);
    if (stage == nullptr) return true;
    StatusOr<std::optional<int64_t>> count = models::ArgInt(*stage, "count", 1);
    if (!count.ok() || !*count || **count > 1) return true;
  }
  return false;
}

std::string UniqueName(const std::vector<PlannedStage>& stages, const std::vector<std::string>& removed,
                       const std::string& base) {
  std::set<std::string> taken;
  for (const PlannedStage& stage : stages) taken.insert(stage.name);
  for (const std::string& name : removed) taken.insert(name);
  if (!taken.count(base)) return base;
  for (int n = 2;; ++n) {
    std::string name = fmt::format("{}_{}", base, n);
    if (!taken.count(name)) return name;
  }
}

PlannedStage FromProfile(const TuneInput& input, size_t index) {
  const models::StageProfile& stage = input.profile.stages[index];
  PlannedStage planned;
  planned.name = stage.name;
  planned.op = stage.op.value_or(Op::kMap);
  planned.op_name = stage.op_name;
  planned.profile_index = index;
  planned.parallel = stage.parallel;
  planned.useful_parallelism = stage.parallel ? UsefulParallelism(stage) : 0;
  planned.old_parallelism = stage.parallelism;
  planned.parallelism = stage.parallel ? 1 : stage.parallelism;
  planned.enabled = planned.old_enabled = stage.enabled;
  planned.bytes_per_element = stage.bytes_per_element;
  planned.input_bytes_per_element = index > 0 ? input.profile.stages[index - 1].bytes_per_element : 0;
  const models::StageConfig* config = ConfigStage(input, stage.name);
  if (config != nullptr) {
    planned.old_parallelism = stage.parallel ? config->parallelism : 1;
    planned.old_buffer = config->buffer;
    planned.old_location = config->location;
  }
  if (stage.op == Op::kPrefetch) {
    planned.old_buffer = planned.old_buffer.value_or(1);
    planned.buffer = 1;
  }
  if (stage.op == Op::kCache) {
    planned.old_location = planned.old_location.value_or(models::CacheLocation::Memory());
    planned.location = planned.old_location;
    std::optional<double> bytes = index > 0 ? models::CacheBytes(input.profile, index - 1) : std::nullopt;
    planned.cache_bytes = bytes.value_or(stage.mean_buffer_bytes);
  }
  if (stage.op == Op::kShuffle && config != nullptr) {
    StatusOr<std::optional<int64_t>> buffer = models::ArgInt(*config, "buffer", 1);
    if (buffer.ok() && *buffer)
      planned.state_bytes = static_cast<double>(**buffer) * planned.input_bytes_per_element;
  }
  if (stage.op == Op::kBatch) planned.state_bytes = planned.bytes_per_element;  // the batch being filled
  return planned;
}

models::StageProfile Synthesised(const PlannedStage& planned, double visit_ratio,
                                 double seconds_per_element) {
  models::StageProfile stage;
  stage.name = planned.name;
  stage.op = planned.op;
  stage.op_name = planned.op_name;
  stage.parallelism = 1;
  stage.cpu_seconds_per_element = seconds_per_element;
  stage.latency_seconds = seconds_per_element;
  stage.measured_latency_seconds = seconds_per_element;
  stage.bytes_per_element = planned.bytes_per_element;
  stage.visit_ratio = visit_ratio;
  stage.cpu_seconds_per_output = seconds_per_element * visit_ratio;
  stage.scaling.kind = models::ScalingKind::kLinear;
  return stage;
}

// The seed of the per-epoch order a cache after stage `index` would freeze:
// a list_files source that reshuffles every epoch (`shuffle_seed`) or a
// shuffle stage at or before it. A cache replays its first epoch in the
// order it was filled, so the plan keeps such an order with a shuffle of a
// whole epoch after the cache. nullopt: the order is the same every epoch.
std::optional<int64_t> PerEpochOrderSeed(const TuneInput& input, size_t index) {
  std::optional<int64_t> seed;
  for (size_t i = 0; i <= index && i < input.profile.stages.size(); ++i) {
    const models::StageConfig* stage = ConfigStage(input, input.profile.stages[i].name);
    if (stage == nullptr) continue;
    const char* key = stage->op == Op::kListFiles ? "shuffle_seed"
                      : stage->op == Op::kShuffle ? "seed"
                                                  : nullptr;
    if (key == nullptr) continue;
    StatusOr<std::optional<int64_t>> value = models::ArgInt(*stage, key, 0);
    if (stage->op == Op::kShuffle) {
      seed = value.ok() && *value ? **value : 0;
    } else if (value.ok() && *value) {
      seed = **value;
    }
  }
  return seed;
}

// Switchable stages a plan may turn off: those the profile says buy nothing
// the model sees.
bool MaySwitchOff(const models::StageProfile& stage) {
  return stage.switchable && stage.enabled && stage.may_switch_off;
}

PlannedStage Inserted(const std::string& name, Op op, double bytes_per_element) {
  PlannedStage planned;
  planned.name = name;
  planned.op = op;
  planned.op_name = models::OpName(op);
  planned.bytes_per_element = bytes_per_element;
  planned.input_bytes_per_element = bytes_per_element;
  return planned;
}

}  // namespace

int UsefulParallelism(const models::StageProfile& stage) {
  const models::UslFit& fit = stage.scaling;
  if (fit.kind != models::ScalingKind::kAmdahl && fit.kind != models::ScalingKind::kUsl) return 0;
  // Throughput relative to one worker's: p / Slowdown(p).
  auto relative = [&fit](int p) { return p / fit.Slowdown(p); };
  constexpr int kLimit = 1 << 16;
  for (int p = 2; p < kLimit; ++p) {
    if (relative(p) - relative(p - 1) < kMinWorkerGain * relative(1)) return p - 1;
  }
  return 0;
}

const char* ObjectiveName(Objective objective) { return objective == Objective::kDemand ? "demand" : "max"; }

const char* CacheKindName(CacheKind kind) {
  switch (kind) {
    case CacheKind::kNone:
      return "none";
    case CacheKind::kMemory:
      return "memory";
    case CacheKind::kDisk:
      return "disk";
  }
  return "none";
}

std::string DescribeChoice(const TuneInput& input, const CacheChoice& choice) {
  if (choice.kind == CacheKind::kNone) return "no cache";
  const std::string& name =
      choice.after < input.profile.stages.size() ? input.profile.stages[choice.after].name : "?";
  return fmt::format("{} cache after \"{}\"", CacheKindName(choice.kind), name);
}

std::vector<CacheChoice> CacheChoices(const TuneInput& input, const Resources& resources,
                                      std::vector<CacheOption>* rejected) {
  const models::Profile& profile = input.profile;
  if (profile.cache_stage && !ExistingCacheIsMovable(profile)) {
    // The run's cache stays: its choice is the only one (see MakeCandidate).
    size_t cache = *profile.cache_stage;
    const models::StageConfig* config = ConfigStage(input, profile.stages[cache].name);
    bool memory = config == nullptr || !config->location || config->location->in_memory();
    if (cache == 0) return {CacheChoice{}};
    return {CacheChoice{memory ? CacheKind::kMemory : CacheKind::kDisk, cache - 1}};
  }
  std::vector<CacheChoice> choices = {CacheChoice{}};
  models::Profile unbudgeted = profile;
  unbudgeted.memory_budget_bytes.reset();  // the solver checks memory with every buffer counted
  for (size_t k = 0; k + 1 < profile.stages.size(); ++k) {
    const models::StageProfile& stage = profile.stages[k];
    if (profile.cache_stage && k == *profile.cache_stage) continue;
    if (stage.op == Op::kPrefetch || stage.op == Op::kCache) continue;
    std::optional<std::string> why = models::CacheNotAllowed(unbudgeted, k);
    if (!why && !RepeatFollows(input, k)) why = "no repeat follows it, so nothing would ever be replayed";
    if (!why && !resources.caches_allowed) why = "caches are off (--no-cache)";
    if (why) {
      if (rejected != nullptr) {
        CacheOption option;
        option.choice = CacheChoice{CacheKind::kMemory, k};
        option.description = fmt::format("cache after \"{}\"", stage.name);
        option.note = *why;
        rejected->push_back(option);
      }
      continue;
    }
    choices.push_back(CacheChoice{CacheKind::kMemory, k});
    if (resources.disk_cache_dir) choices.push_back(CacheChoice{CacheKind::kDisk, k});
  }
  return choices;
}

StatusOr<Candidate> MakeCandidate(const TuneInput& input, const Resources& resources,
                                  const CacheChoice& choice) {
  const models::Profile& profile = input.profile;
  if (profile.stages.empty()) return InvalidInput("the profile has no stages");
  Candidate candidate;
  candidate.choice = choice;
  bool movable = ExistingCacheIsMovable(profile);
  if (profile.cache_stage && !movable) {
    candidate.notes.push_back(fmt::format(
        "the run's cache \"{}\" stays where it is: the stages before it did no work in the traced window, so "
        "the pipeline without it cannot be predicted",
        profile.stages[*profile.cache_stage].name));
  }

  std::vector<size_t> profile_of;  // candidate index -> profile index (SIZE_MAX: inserted)
  std::vector<models::StageProfile> stage_profiles;
  for (size_t i = 0; i < profile.stages.size(); ++i) {
    if (profile.cache_stage && i == *profile.cache_stage && movable) {
      candidate.removed_stages.push_back(profile.stages[i].name);
      continue;
    }
    candidate.stages.push_back(FromProfile(input, i));
    stage_profiles.push_back(profile.stages[i]);
    if (profile.cache_stage && i == *profile.cache_stage) {
      candidate.cache_stage = candidate.stages.size() - 1;
      if (candidate.stages.size() >= 2) candidate.cache_after = candidate.stages.size() - 2;
    }
    if (choice.kind == CacheKind::kNone || (profile.cache_stage && !movable) || i != choice.after) continue;
    std::optional<std::string> not_allowed;
    {
      models::Profile unbudgeted = profile;
      unbudgeted.memory_budget_bytes.reset();
      not_allowed = models::CacheNotAllowed(unbudgeted, i);
    }
    if (not_allowed)
      return InvalidInput(fmt::format("no cache after \"{}\": {}", profile.stages[i].name, *not_allowed));
    if (choice.kind == CacheKind::kDisk && !resources.disk_cache_dir) {
      return InvalidInput("a disk cache needs a directory (--cache-dir)");
    }
    PlannedStage cache = Inserted(UniqueName(candidate.stages, candidate.removed_stages, "cache"), Op::kCache,
                                  profile.stages[i].bytes_per_element);
    cache.location = choice.kind == CacheKind::kMemory
                         ? models::CacheLocation::Memory()
                         : models::CacheLocation::Disk(*resources.disk_cache_dir);
    cache.cache_bytes = models::CacheBytes(profile, i).value_or(0);
    if (choice.kind == CacheKind::kDisk && resources.disk_free_bytes &&
        cache.cache_bytes > static_cast<double>(*resources.disk_free_bytes)) {
      return InvalidInput(fmt::format("a disk cache after \"{}\" needs {} and {} has {} free",
                                      profile.stages[i].name, FormatBytes(cache.cache_bytes),
                                      *resources.disk_cache_dir,
                                      FormatBytes(static_cast<double>(*resources.disk_free_bytes))));
    }
    double seconds = kPassThroughSeconds;
    if (choice.kind == CacheKind::kDisk) seconds += cache.bytes_per_element * kDiskReplaySecondsPerByte;
    candidate.stages.push_back(cache);
    stage_profiles.push_back(Synthesised(cache, profile.stages[i].visit_ratio, seconds));
    candidate.cache_after = candidate.stages.size() - 2;
    candidate.cache_stage = candidate.stages.size() - 1;
    if (std::optional<int64_t> seed = PerEpochOrderSeed(input, i)) {
      // The cache would freeze the epoch's order: a shuffle of the whole
      // epoch after it draws a new order every pass. After a memory cache
      // it holds records whose payloads the cache owns.
      double elements = std::ceil(models::ElementsPerEpoch(profile, i).value_or(1));
      PlannedStage shuffle = Inserted(UniqueName(candidate.stages, candidate.removed_stages, "epoch_shuffle"),
                                      Op::kShuffle, cache.bytes_per_element);
      shuffle.args = Json{{"buffer", static_cast<int64_t>(std::max(1.0, elements))}, {"seed", *seed}};
      shuffle.state_bytes =
          elements * (choice.kind == CacheKind::kMemory ? kSharedElementBytes : cache.bytes_per_element);
      candidate.stages.push_back(shuffle);
      stage_profiles.push_back(Synthesised(shuffle, profile.stages[i].visit_ratio, kPassThroughSeconds));
      candidate.notes.push_back(fmt::format(
          "a cache replays its first epoch in the order it was filled; \"{}\" (a shuffle of the whole epoch, "
          "{:.0f} elements, seed {}) after it keeps a new order every epoch",
          shuffle.name, elements, *seed));
    }
  }
  if (choice.kind != CacheKind::kNone && !(profile.cache_stage && !movable) && !candidate.cache_stage) {
    return InvalidInput(
        fmt::format("no cache after stage #{}: the profile has no such stage to cache", choice.after + 1));
  }
  for (const models::WorkerGroup& group : profile.groups) {
    PlannedGroup planned;
    planned.workers = planned.old_workers = group.workers;
    planned.buffer_per_worker = planned.old_buffer_per_worker = group.buffer_per_worker;
    planned.persistent = planned.old_persistent = group.persistent;
    planned.fetch_threads = planned.old_fetch_threads = group.fetch_threads;
    candidate.groups.push_back(planned);
  }
  if (candidate.stages.back().op != Op::kPrefetch && profile.groups.empty()) {
    PlannedStage prefetch = Inserted(UniqueName(candidate.stages, candidate.removed_stages, "prefetch"),
                                     Op::kPrefetch, candidate.stages.back().bytes_per_element);
    prefetch.buffer = 1;
    candidate.stages.push_back(prefetch);
    stage_profiles.push_back(Synthesised(prefetch, 1.0, kPassThroughSeconds));
  }

  candidate.profile = profile;
  candidate.profile.stages = std::move(stage_profiles);
  candidate.profile.cache_stage.reset();  // the plan is predicted in steady state: the cache is full
  candidate.profile.cache_filled = false;
  candidate.profile.storage_stage.reset();
  if (profile.storage_stage) {
    candidate.profile.storage_stage =
        candidate.profile.FindStage(profile.stages[*profile.storage_stage].name);
  }
  if (candidate.cache_after) {
    for (size_t i = 0; i <= *candidate.cache_after; ++i) candidate.stages[i].cached = true;
  }
  return candidate;
}

models::Configuration CandidateConfiguration(const Candidate& candidate, const Resources& resources) {
  models::Configuration config;
  for (const PlannedStage& stage : candidate.stages)
    config.parallelism.push_back(stage.parallel ? stage.parallelism : 1);
  config.cores = resources.cores;
  config.cache_after = candidate.cache_after;
  config.storage_bytes_per_second = resources.storage_bytes_per_second
                                        ? resources.storage_bytes_per_second
                                        : candidate.profile.storage_bytes_per_second;
  config.step_time_seconds = candidate.profile.step_time_seconds;
  for (const PlannedGroup& group : candidate.groups) {
    config.group_workers.push_back(group.workers);
    config.group_buffer.push_back(group.buffer_per_worker);
    config.group_persistent.push_back(group.persistent);
    config.group_fetch_threads.push_back(group.fetch_threads);
  }
  bool switchable = std::any_of(candidate.profile.stages.begin(), candidate.profile.stages.end(),
                                [](const models::StageProfile& s) { return s.switchable; });
  if (!candidate.groups.empty() || switchable) {
    for (const PlannedStage& stage : candidate.stages) config.stage_enabled.push_back(stage.enabled);
  }
  return config;
}

models::Prediction Evaluate(const Candidate& candidate, const Resources& resources) {
  return models::Predict(candidate.profile, CandidateConfiguration(candidate, resources));
}

models::MemoryEstimate Memory(const Candidate& candidate) {
  if (!candidate.groups.empty()) {
    models::Configuration config = CandidateConfiguration(candidate, Resources{});
    models::MemoryEstimate memory;
    memory.processes = candidate.profile.base_memory_bytes;
    for (size_t g = 0; g < candidate.groups.size(); ++g)
      memory.processes += candidate.groups[g].workers * candidate.profile.groups[g].memory_bytes_per_worker;
    memory.prefetch = models::WorkerMemoryBytes(candidate.profile, config) - memory.processes;
    return memory;
  }
  std::vector<models::StageMemoryInput> inputs;
  for (const PlannedStage& stage : candidate.stages) {
    models::StageMemoryInput input;
    input.output_bytes_per_element = stage.bytes_per_element;
    input.input_bytes_per_element = stage.input_bytes_per_element;
    input.workers = stage.parallel ? stage.parallelism : 1;
    if (stage.op == Op::kPrefetch) input.prefetch_buffer = stage.buffer.value_or(1);
    input.state_bytes = stage.state_bytes;
    if (stage.op == Op::kCache) {
      bool memory = !stage.location || stage.location->in_memory();
      (memory ? input.memory_cache_bytes : input.disk_cache_bytes) = stage.cache_bytes;
    }
    inputs.push_back(input);
  }
  return models::EstimateMemory(inputs);
}

int Threads(const Candidate& candidate) {
  if (!candidate.groups.empty()) {
    int threads = 1;  // the consumer's
    for (const PlannedGroup& group : candidate.groups) {
      // Fetch threads beside each worker's own thread, or beside the consumer's.
      int fetch = group.fetch_threads > 1 ? group.fetch_threads : 0;
      threads += group.workers > 0 ? group.workers * (1 + fetch) : fetch;
    }
    return threads;
  }
  int threads = 0;
  for (const PlannedStage& stage : candidate.stages) threads += stage.parallel ? stage.parallelism : 1;
  return threads;
}

std::vector<Candidate> GroupSettings(const Candidate& traced, int max_workers) {
  std::vector<Candidate> out;
  if (traced.groups.empty()) return out;
  const models::WorkerGroup& group = traced.profile.groups[0];
  std::vector<bool> persistence{group.persistent};
  if (!group.persistent_knob.empty()) persistence.push_back(!group.persistent);
  std::vector<size_t> switches;
  for (size_t i = 0; i < traced.stages.size(); ++i) {
    if (MaySwitchOff(traced.profile.stages[i])) switches.push_back(i);
  }
  // Workers past the group's limit would sit idle: no setting has them.
  if (group.max_workers > 0) max_workers = std::min(max_workers, group.max_workers);
  std::vector<int> fetch_threads{group.fetch_threads};
  if (!group.fetch_threads_knob.empty()) {
    for (int k : kFetchThreadChoices) {
      if (k != group.fetch_threads) fetch_threads.push_back(k);
    }
  }
  for (int workers = group.may_run_on_consumer ? 0 : 1; workers <= max_workers; ++workers) {
    for (int buffer = 1; buffer <= (workers > 0 ? kMaxWorkerBuffer : 1); ++buffer) {
      for (bool persistent : persistence) {
        if (workers == 0 && persistent != group.persistent) continue;  // no workers to keep
        for (int threads : fetch_threads) {
          for (size_t mask = 0; mask < (size_t{1} << switches.size()); ++mask) {
            Candidate c = traced;
            c.groups[0].workers = workers;
            c.groups[0].buffer_per_worker = workers > 0 ? buffer : group.buffer_per_worker;
            c.groups[0].persistent = persistent;
            c.groups[0].fetch_threads = threads;
            for (size_t k = 0; k < switches.size(); ++k) c.stages[switches[k]].enabled = !(mask >> k & 1);
            out.push_back(std::move(c));
          }
        }
      }
    }
  }
  return out;
}

std::array<int, 5> Departure(const Candidate& candidate) {
  std::array<int, 5> departure{};
  for (const PlannedGroup& group : candidate.groups) {
    int buffer = group.workers > 0 ? group.buffer_per_worker : group.old_buffer_per_worker;
    int traced = group.old_buffer_per_worker;
    departure[0] += group.workers;
    departure[1] += buffer >= traced ? buffer - traced : 2 * (traced - buffer);
    departure[2] += group.persistent != group.old_persistent ? 1 : 0;
    // Last: a thread is cheaper than a process, so of settings that tie the
    // one with fewer workers wins, then the one nearest the traced threads.
    departure[4] += std::abs(group.fetch_threads - group.old_fetch_threads);
  }
  for (size_t i = 0; i < candidate.stages.size(); ++i) {
    const models::StageProfile& stage = candidate.profile.stages[i];
    if (!stage.switchable) continue;
    bool preferred = stage.enabled && !MaySwitchOff(stage);
    departure[3] += candidate.stages[i].enabled != preferred;
  }
  return departure;
}

}  // namespace pipetune::tuner

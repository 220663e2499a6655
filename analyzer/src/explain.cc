// The diagnosis sentence (explain.h). Every remedy it names is a prediction
// of the same model the report shows, for one change to the configuration.
#include "explain.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <optional>
#include <vector>

#include "format_util.h"
#include "pipetune/base/size.h"

namespace pipetune::analyzer::internal {
namespace {

// A remedy must gain this much to be worth a sentence.
constexpr double kWorthwhileGain = 1.10;

struct Remedy {
  std::string change;  // "parallelism 3", "a cache after decode", "4 cores"
  models::Prediction prediction;
};

// What binds after a change, in words: "(the CPU bound)".
std::string ThenLimit(const models::Profile& profile, const models::Prediction& p) {
  switch (p.binding.kind) {
    case models::BoundKind::kCpu:
      return "the CPU bound";
    case models::BoundKind::kDemand:
      return "the consumer's demand";
    case models::BoundKind::kStorage:
      return "the storage bandwidth";
    case models::BoundKind::kConcurrency:
      if (p.binding.group) return fmt::format("then the {} limit", profile.groups[*p.binding.group].name);
      return fmt::format("then stage {} limits", profile.stages[*p.binding.stage].name);
    case models::BoundKind::kConsumer:
      return "then the consumer's thread limits";
    case models::BoundKind::kStartup:
      return "then worker start-up limits";
  }
  return "";
}

std::string Reach(const models::Profile& profile, const Remedy& remedy) {
  return fmt::format("{} would reach {} outputs/s ({})", remedy.change, Rate(remedy.prediction.throughput),
                     ThenLimit(profile, remedy.prediction));
}

bool Gains(const models::Prediction& after, const models::Prediction& before) {
  return after.throughput > before.throughput * kWorthwhileGain;
}

// Workers for the stage, and then for each stage that limits next, while
// that is what binds (at most a few rounds): "parallelism 2, with augment at 2".
std::optional<Remedy> MoreWorkers(const models::Profile& profile, const models::Configuration& observed,
                                  const models::Prediction& now, size_t stage) {
  constexpr int kMaxRounds = 6;
  models::Configuration changed = observed;
  std::vector<size_t> order;
  size_t next = stage;
  for (int round = 0; round < kMaxRounds; ++round) {
    if (!profile.stages[next].parallel) break;
    int best = models::ParallelismForBestThroughput(profile, changed, next);
    if (best <= changed.parallelism[next]) break;
    changed.parallelism[next] = best;
    if (std::find(order.begin(), order.end(), next) == order.end()) order.push_back(next);
    models::Prediction after = models::Predict(profile, changed);
    if (after.binding.kind != models::BoundKind::kConcurrency || !after.binding.stage) break;
    next = *after.binding.stage;
  }
  if (order.empty() || order.front() != stage) return std::nullopt;
  std::string change = fmt::format("parallelism {}", changed.parallelism[stage]);
  std::vector<std::string> others;
  for (size_t i = 1; i < order.size(); ++i) {
    others.push_back(fmt::format("{} at {}", profile.stages[order[i]].name, changed.parallelism[order[i]]));
  }
  if (!others.empty()) change += fmt::format(", with {},", fmt::join(others, " and "));
  Remedy remedy{change, models::Predict(profile, changed)};
  if (!Gains(remedy.prediction, now)) return std::nullopt;
  return remedy;
}

// The fewest whole cores (up to four times the run's) that reach what four
// times the cores would.
std::optional<Remedy> MoreCores(const models::Profile& profile, const models::Configuration& observed,
                                const models::Prediction& now) {
  models::Configuration changed = observed;
  double base = std::max(1.0, std::ceil(observed.cores));
  changed.cores = 4 * base;
  double best = models::Predict(profile, changed).throughput;
  if (best <= now.throughput * kWorthwhileGain) return std::nullopt;
  // The fewest whole cores more that reach 99% of that. Only the CPU bound
  // moves with the cores, so throughput does not fall as they grow and
  // bisection finds the least count a scan from 1 would: in a few
  // predictions, where a scan made 3 per core of the host (a damaged trace
  // claiming millions of cores took seconds; fuzz/trace_analysis_fuzz.cc).
  auto reaches = [&](int64_t extra, models::Prediction* p) {
    changed.cores = base + static_cast<double>(extra);
    *p = models::Predict(profile, changed);
    return p->throughput >= 0.99 * best;
  };
  models::Prediction p;
  int64_t low = 1, high = 3 * static_cast<int64_t>(base);
  while (low < high) {
    const int64_t mid = low + (high - low) / 2;
    if (reaches(mid, &p)) {
      high = mid;
    } else {
      low = mid + 1;
    }
  }
  if (!reaches(low, &p)) return std::nullopt;
  return Remedy{fmt::format("{} cores", CoreCount(base + static_cast<double>(low))), p};
}

// The admissible cache placement that helps most (the later stage on a tie).
std::optional<Remedy> BestCache(const models::Profile& profile, const models::Configuration& observed,
                                const models::Prediction& now) {
  std::optional<Remedy> best;
  for (size_t k = 0; k < profile.stages.size(); ++k) {
    if (models::CacheNotAllowed(profile, k)) continue;
    if (observed.cache_after && *observed.cache_after >= k) continue;  // the run already caches this
    models::Configuration changed = observed;
    changed.cache_after = k;
    models::Prediction p = models::Predict(profile, changed);
    if (!best || p.throughput >= best->prediction.throughput) {
      std::optional<double> bytes = models::CacheBytes(profile, k);
      best = Remedy{fmt::format("a cache after stage {} ({})", profile.stages[k].name,
                                bytes ? FormatBytes(*bytes) : "size unknown"),
                    p};
    }
  }
  if (best && !Gains(best->prediction, now)) return std::nullopt;
  return best;
}

std::string StageLimits(const models::Profile& profile, const models::Configuration& observed,
                        const models::Prediction& now, size_t index) {
  const models::StageProfile& stage = profile.stages[index];
  std::string head =
      fmt::format("Stage {} limits throughput at {} outputs/s: ", stage.name, Rate(now.throughput));
  std::string kind = stage.latency_bound ? "latency-bound" : "CPU-bound";
  if (stage.parallel) {
    head += fmt::format("it is {} at parallelism {} on {} cores", kind, stage.parallelism,
                        CoreCount(profile.cores));
    if (std::optional<Remedy> workers = MoreWorkers(profile, observed, now, index)) {
      return head + "; " + Reach(profile, *workers) + ".";
    }
    if (std::optional<Remedy> cores = MoreCores(profile, observed, now)) {
      return head + "; more workers need more cores: " + Reach(profile, *cores) + ".";
    }
  } else {
    head += fmt::format("it runs on one thread, {} ms per element, and is {}",
                        Millis(stage.latency_seconds * 1e3), kind);
  }
  if (std::optional<Remedy> cache = BestCache(profile, observed, now)) {
    return head + "; " + Reach(profile, *cache) + ".";
  }
  return head + "; its work per element must get cheaper.";
}

std::string CpuLimits(const models::Profile& profile, const models::Configuration& observed,
                      const models::Prediction& now) {
  std::string head = fmt::format("The pipeline is CPU-bound at {} outputs/s: it uses all {} cores",
                                 Rate(now.throughput), CoreCount(profile.cores));
  if (now.bottleneck_stage && now.cores_used > 0) {
    const models::StagePrediction& heaviest = now.stages[*now.bottleneck_stage];
    head += fmt::format(", {} of that in stage {}", Percent(heaviest.cores_used / now.cores_used),
                        profile.stages[*now.bottleneck_stage].name);
  }
  if (std::optional<Remedy> cache = BestCache(profile, observed, now)) {
    return head + "; " + Reach(profile, *cache) + ".";
  }
  if (std::optional<Remedy> cores = MoreCores(profile, observed, now)) {
    return head + "; " + Reach(profile, *cores) + ".";
  }
  return head + "; only cheaper work per element would help.";
}

std::string DemandMet(const models::Profile& profile, const models::Prediction& now) {
  std::string text = fmt::format(
      "The pipeline keeps up with the consumer at {} outputs/s (one step every {} ms); the consumer waits "
      "for "
      "input {} of the time",
      Rate(now.throughput), Millis(profile.step_time_seconds.value_or(0) * 1e3),
      Percent(profile.consumer_stall_fraction));
  std::optional<size_t> next;
  for (size_t i = 0; i < now.stages.size(); ++i) {
    if (!std::isfinite(now.stages[i].max_throughput)) continue;
    if (!next || now.stages[i].max_throughput < now.stages[*next].max_throughput) next = i;
  }
  if (next) {
    text += fmt::format(", and stage {} would limit next at {} outputs/s", profile.stages[*next].name,
                        Rate(now.stages[*next].max_throughput));
  }
  return text + ".";
}

std::string StorageLimits(const models::Profile& profile, const models::Configuration& observed,
                          const models::Prediction& now) {
  std::string head =
      fmt::format("Storage bandwidth limits throughput at {} outputs/s ({}/s of {}/s)", Rate(now.throughput),
                  FormatBytes(now.throughput * profile.storage_bytes_per_output),
                  FormatBytes(profile.storage_bytes_per_second.value_or(0)));
  if (std::optional<Remedy> cache = BestCache(profile, observed, now)) {
    return head + "; " + Reach(profile, *cache) + ".";
  }
  return head + "; faster storage or smaller files would help.";
}

// The fewest workers for group `g` (0 to 64) that reach what the most would.
std::optional<Remedy> MoreGroupWorkers(const models::Profile& profile, const models::Configuration& observed,
                                       const models::Prediction& now, size_t g) {
  constexpr int kMostWorkers = 64;
  models::Configuration changed = observed;
  double best = 0;
  for (int w = 1; w <= kMostWorkers; ++w) {
    changed.group_workers[g] = w;
    best = std::max(best, models::Predict(profile, changed).throughput);
  }
  if (best <= now.throughput * kWorthwhileGain) return std::nullopt;
  const models::WorkerGroup& group = profile.groups[g];
  for (int w = 1; w <= kMostWorkers; ++w) {
    changed.group_workers[g] = w;
    models::Prediction p = models::Predict(profile, changed);
    if (p.throughput < 0.99 * best) continue;
    std::string knob = group.workers_knob.empty() ? group.name : group.workers_knob;
    return Remedy{fmt::format("{}={}", knob, w), p};
  }
  return std::nullopt;
}

std::string GroupLimits(const models::Profile& profile, const models::Configuration& observed,
                        const models::Prediction& now, size_t g) {
  const models::WorkerGroup& group = profile.groups[g];
  std::string head = fmt::format("The {} limit throughput at {} outputs/s: {} of them, each running ",
                                 group.name, Rate(now.throughput), observed.group_workers[g]);
  std::vector<std::string> names;
  for (size_t i = group.first_stage; i <= group.last_stage; ++i) names.push_back(profile.stages[i].name);
  head += fmt::format("{} in turn", fmt::join(names, ", "));
  if (now.binding.stage) head += fmt::format("; {} costs the most", profile.stages[*now.binding.stage].name);
  if (std::optional<Remedy> workers = MoreGroupWorkers(profile, observed, now, g)) {
    return head + "; " + Reach(profile, *workers) + ".";
  }
  // Workers that would help but get no work: more shards, not more cores.
  if (group.max_workers > 0 && observed.group_workers[g] >= group.max_workers) {
    return head + "; no more workers get work: " + group.max_workers_reason + ".";
  }
  if (std::optional<Remedy> cores = MoreCores(profile, observed, now)) {
    return head + "; more workers need more cores: " + Reach(profile, *cores) + ".";
  }
  return head + "; the work per element must get cheaper.";
}

// The consumer's thread runs stages besides its step (a DataLoader with no
// workers): moving them to workers is the remedy.
std::string ConsumerLimits(const models::Profile& profile, const models::Configuration& observed,
                           const models::Prediction& now) {
  // Name what it runs: all the input stages at 0 workers, only the
  // unpickling of the workers' batches (transfer) with workers.
  std::vector<std::string> on_thread;
  for (size_t i = 0; i < profile.stages.size(); ++i) {
    if (models::StageRuns(profile, observed, i) && models::RunsOnConsumerThread(profile, observed, i))
      on_thread.push_back(profile.stages[i].name);
  }
  std::string head = fmt::format(
      "The consumer's thread limits throughput at {} outputs/s: besides its step ({} ms) it runs {}",
      Rate(now.throughput), Millis(profile.step_time_seconds.value_or(0) * 1e3), fmt::join(on_thread, ", "));
  if (now.bottleneck_stage) {
    head += fmt::format("; {} costs the most", profile.stages[*now.bottleneck_stage].name);
  } else {
    head += ", and its step takes most of that time";
  }
  for (size_t g = 0; g < profile.groups.size(); ++g) {
    if (observed.group_workers[g] != 0) continue;
    if (std::optional<Remedy> workers = MoreGroupWorkers(profile, observed, now, g)) {
      return head + "; " + Reach(profile, *workers) + ".";
    }
  }
  return head + ".";
}

std::string StartupLimits(const models::Profile& profile, const models::Configuration& observed,
                          const models::Prediction& now) {
  std::string head = fmt::format(
      "Worker start-up takes most of each epoch ({} s of start-up an epoch) and limits throughput to {} "
      "outputs/s",
      fmt::format("{:.2f}", now.startup_seconds_per_epoch), Rate(now.throughput));
  models::Configuration changed = observed;
  for (size_t g = 0; g < profile.groups.size(); ++g) changed.group_persistent[g] = true;
  Remedy persistent{"persistent workers", models::Predict(profile, changed)};
  if (!profile.groups.empty() && !profile.groups[0].persistent_knob.empty()) {
    persistent.change = profile.groups[0].persistent_knob + "=true";
  }
  if (Gains(persistent.prediction, now)) return head + "; " + Reach(profile, persistent) + ".";
  return head + ".";
}

}  // namespace

std::string Explain(const models::Profile& profile, const models::Prediction& prediction) {
  models::Configuration observed = models::ObservedConfiguration(profile);
  if (prediction.throughput <= 0) return "Nothing reached the consumer in the measured window.";
  switch (prediction.binding.kind) {
    case models::BoundKind::kConcurrency:
      if (prediction.binding.group)
        return GroupLimits(profile, observed, prediction, *prediction.binding.group);
      return StageLimits(profile, observed, prediction, *prediction.binding.stage);
    case models::BoundKind::kConsumer:
      return ConsumerLimits(profile, observed, prediction);
    case models::BoundKind::kStartup:
      return StartupLimits(profile, observed, prediction);
    case models::BoundKind::kCpu:
      return CpuLimits(profile, observed, prediction);
    case models::BoundKind::kDemand:
      return DemandMet(profile, prediction);
    case models::BoundKind::kStorage:
      return StorageLimits(profile, observed, prediction);
  }
  return "";
}

}  // namespace pipetune::analyzer::internal

// The bounds of the rate model and the throughput they allow (rate_model.h).
#include "pipetune/models/rate_model.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "pipetune/base/check.h"
#include "pipetune/base/size.h"

namespace pipetune::models {
namespace {

constexpr double kInfinity = std::numeric_limits<double>::infinity();

// Whatever else the process does (the consumer, the tracer), the stages keep
// at least this share of the cores; a measurement that says otherwise is
// noise from a run too short to tell.
constexpr double kMinStageCoreShare = 0.05;

bool IsCached(const Profile& profile, const Configuration& config, size_t index) {
  if (!config.cache_after || index > *config.cache_after) return false;
  // The run's own cache, still filling during the window: its upstream ran.
  bool existing = profile.cache_stage && *config.cache_after + 1 == *profile.cache_stage;
  return !existing || profile.cache_filled;
}

// L_i at parallelism p: the measured latency, scaled by the stage's fitted
// slowdown relative to the level it was measured at.
double LatencyAt(const StageProfile& stage, int parallelism) {
  const UslFit& fit = stage.scaling;
  if (fit.kind == ScalingKind::kLinear || fit.kind == ScalingKind::kNone) return stage.latency_seconds;
  return stage.latency_seconds * fit.Slowdown(parallelism) / fit.Slowdown(stage.parallelism);
}

double ConcurrencyBound(const StageProfile& stage, int parallelism) {
  double per_output = stage.visit_ratio * LatencyAt(stage, parallelism);
  return per_output > 0 ? parallelism / per_output : kInfinity;
}

double StageCores(const Profile& profile, const Configuration& config) {
  double floor = kMinStageCoreShare * config.cores;
  return std::max(floor, config.cores - profile.other_cpu_cores);
}

std::optional<size_t> Bottleneck(const Profile& profile, const Prediction& prediction,
                                 const std::vector<bool>& counted) {
  switch (prediction.binding.kind) {
    case BoundKind::kConcurrency:
    case BoundKind::kStorage:
    case BoundKind::kConsumer:
      return prediction.binding.stage;
    case BoundKind::kCpu: {
      std::optional<size_t> heaviest;
      for (size_t i = 0; i < profile.stages.size(); ++i) {
        if (!counted[i]) continue;
        if (!heaviest ||
            profile.stages[i].cpu_seconds_per_output > profile.stages[*heaviest].cpu_seconds_per_output) {
          heaviest = i;
        }
      }
      return heaviest;
    }
    case BoundKind::kDemand:
    case BoundKind::kStartup:
      return std::nullopt;
  }
  return std::nullopt;
}

int GroupWorkers(const Profile& profile, const Configuration& config, size_t group) {
  return config.group_workers.empty() ? profile.groups[group].workers : config.group_workers[group];
}

// The workers of a group that get work: those beyond its max_workers (a
// stream with fewer shards than workers) are started but sit idle.
int BusyWorkers(const Profile& profile, const Configuration& config, size_t group) {
  int workers = GroupWorkers(profile, config, group);
  int most = profile.groups[group].max_workers;
  return most > 0 ? std::min(workers, most) : workers;
}

int GroupFetchThreads(const Profile& profile, const Configuration& config, size_t group) {
  int threads = config.group_fetch_threads.empty() ? profile.groups[group].fetch_threads
                                                   : config.group_fetch_threads[group];
  return std::max(1, threads);
}

// Wall seconds one of the group's workers (or the consumer's thread) spends
// per output on the counted stages among `members`, where the per-sample
// stages run on K fetch threads. Every sample read releases the GIL while it
// waits; its GIL-held CPU, and collate's, run one thread at a time.
//  - On the consumer's thread (no workers), or a worker that holds one index
//    list at a time (prefetch 1): the threads read one output's S samples
//    in r = ceil(S / K) rounds, then collate runs with no read in flight.
//    A round's reads start together and their waits end together, so their
//    GIL-held parts queue behind the wait: a round of k reads lasts one
//    sample's latency plus the other k - 1 samples' GIL time, and the
//    output r latencies plus (S - r) GIL times. Measured on a store 25 ms
//    away, a waiting read's GIL time priced as its CPU (0 workers, K = 8,
//    16 and 32: a round ran 0.94, 0.93 and 0.97 of that; the max of the
//    two, as before, predicted 0 x 32 at 1.9x what it ran).
//  - A worker with prefetch >= 2 holds its next index list while it works on
//    this one, and its threads read that list as soon as they are free
//    (python/pipetune/_fetch.py): reads stay in flight through collate, so
//    an output costs its S reads spread over K threads, S L / K, unless the
//    GIL-held part of the samples and collate binds.
// With K = 1 both are the sum of the stages' V_i L_i, as without threads.
double GroupSecondsPerOutput(const Profile& profile, const Configuration& config, size_t g,
                             const std::vector<size_t>& members) {
  const WorkerGroup& group = profile.groups[g];
  double fetched = 0, rest = 0;
  for (size_t i : members) {
    double cost = profile.stages[i].visit_ratio * profile.stages[i].latency_seconds;
    (i <= group.fetch_last_stage ? fetched : rest) += cost;
  }
  const int threads = GroupFetchThreads(profile, config, g);
  if (threads == 1 || group.fetch_samples <= 1) return fetched + rest;
  const double samples = group.fetch_samples;
  const double gil = samples * group.fetch_gil_seconds_per_sample;
  const int buffer = config.group_buffer.empty() ? group.buffer_per_worker : config.group_buffer[g];
  if (!FetchReadsInRounds(GroupWorkers(profile, config, g), buffer))
    return std::max(fetched / threads, gil + rest);
  const double rounds = std::ceil(samples / threads);
  return rounds * fetched / samples + (samples - rounds) * group.fetch_gil_seconds_per_sample + rest;
}

// The CPU per output that worker groups with workers spend outside their stages.
double GroupOverheadCpu(const Profile& profile, const Configuration& config) {
  double cpu = 0;
  for (size_t g = 0; g < profile.groups.size(); ++g) {
    if (GroupWorkers(profile, config, g) > 0) cpu += profile.groups[g].overhead_cpu_seconds_per_output;
  }
  return cpu;
}

// The stage among `indices` with the largest V_i * L_i: the one to blame
// when the thread they share binds.
std::optional<size_t> Costliest(const Profile& profile, const std::vector<size_t>& indices) {
  std::optional<size_t> costliest;
  double most = -1;
  for (size_t i : indices) {
    double cost = profile.stages[i].visit_ratio * profile.stages[i].latency_seconds;
    if (cost > most) most = cost, costliest = i;
  }
  return costliest;
}

// Each worker group with workers: X * sum over its stages of V_i L_i <= w.
// Its stages show the group's bound as their own ceiling.
void AddGroupBounds(const Profile& profile, const Configuration& config, const std::vector<bool>& counted,
                    Prediction& prediction) {
  for (size_t g = 0; g < profile.groups.size(); ++g) {
    const WorkerGroup& group = profile.groups[g];
    int workers = BusyWorkers(profile, config, g);
    if (workers <= 0) continue;
    std::vector<size_t> members;
    for (size_t i = group.first_stage; i <= group.last_stage && i < profile.stages.size(); ++i) {
      if (counted[i]) members.push_back(i);
    }
    const double per_output = GroupSecondsPerOutput(profile, config, g, members);
    double bound = per_output > 0 ? workers / per_output : kInfinity;
    for (size_t i : members) prediction.stages[i].concurrency_throughput = bound;
    prediction.bounds.push_back({BoundKind::kConcurrency, Costliest(profile, members), bound, g});
  }
}

// The consumer's thread, when it runs stages besides its step:
// X * (step + sum over them of V_i L_i) <= 1.
void AddConsumerBound(const Profile& profile, const Configuration& config, const std::vector<bool>& counted,
                      double step, Prediction& prediction) {
  double per_output = 0;
  std::vector<size_t> members;
  std::vector<std::vector<size_t>> by_group(profile.groups.size());
  for (size_t i = 0; i < profile.stages.size(); ++i) {
    if (!counted[i] || !RunsOnConsumerThread(profile, config, i)) continue;
    const StageProfile& stage = profile.stages[i];
    if (stage.group && *stage.group < by_group.size()) {
      by_group[*stage.group].push_back(i);  // a group with 0 workers: its fetch threads are the consumer's
    } else {
      per_output += stage.visit_ratio * stage.latency_seconds;
    }
    members.push_back(i);
  }
  for (size_t g = 0; g < by_group.size(); ++g) {
    if (!by_group[g].empty()) per_output += GroupSecondsPerOutput(profile, config, g, by_group[g]);
  }
  if (members.empty()) return;
  // The input side is to blame when it takes more of the thread than the step.
  std::optional<size_t> blame = per_output >= step ? Costliest(profile, members) : std::nullopt;
  double bound = step + per_output > 0 ? 1.0 / (step + per_output) : kInfinity;
  for (size_t i : members) prediction.stages[i].concurrency_throughput = 1.0 / per_output;
  prediction.bounds.push_back({BoundKind::kConsumer, blame, bound});
}

// A step that runs threads of its own holds whole cores while it runs: each
// of its parallel sections waits for its slowest thread, so a worker that
// takes a core from one of them stalls the whole step, and the share of a
// core left between sections is no core a worker can use. Priced by CPU
// alone, one worker beside a step of torch's intra-op pool on 2 cores was
// predicted at 3.4 batches/s and ran 2.4, slower than none (issue 39). So
// the work off the consumer's thread, W
// per output, runs on the cores the step leaves while it runs, D, and on B
// between steps (each worker is one thread):
//   X * W <= D * step * X + B * (1 - step * X).
// With a step of one thread this is never tighter than the CPU and group
// bounds, so it is added only for a step that holds two cores or more.
void AddHeldStepBound(const Profile& profile, const Configuration& config, const std::vector<bool>& counted,
                      double step, double stage_cores, Prediction& prediction) {
  // A fifth of a core past n whole ones is a thread of the step's own at
  // work in its parallel sections.
  constexpr double kThreadShare = 0.2;
  const double held = std::min(stage_cores, std::ceil(profile.consumer_step_cores - kThreadShare));
  if (held < 2 || step <= 0) return;
  double lanes = 0;
  for (size_t g = 0; g < profile.groups.size(); ++g) lanes += BusyWorkers(profile, config, g);
  if (lanes <= 0) return;
  double work = GroupOverheadCpu(profile, config);
  for (size_t i = 0; i < profile.stages.size(); ++i) {
    if (counted[i] && !RunsOnConsumerThread(profile, config, i))
      work += profile.stages[i].cpu_seconds_per_output;
  }
  const double between = std::min(lanes, stage_cores);
  const double during = std::min(lanes, std::max(0.0, stage_cores - held));
  const double per_output = work + (between - during) * step;
  prediction.bounds.push_back(
      {BoundKind::kCpu, std::nullopt, per_output > 0 ? between / per_output : kInfinity});
}

// What an epoch boundary costs a group of w workers, besides their start-up.
// An epoch is a pipeline that fills and drains: the workers start their
// first batches side by side and finish their last ones side by side, so
// the first w outputs arrive together and so do the last w. With p the
// input's time per output (the bounds other than the consumer's) and c the
// consumer's (its step and the stages on its thread), an epoch of E outputs takes
// E * max(p, c) + w * min(p, c): when the input binds, the consumer takes
// the last w outputs after the workers' work has ended (they wait for the
// next epoch's indices); when the consumer binds, it waits for the first
// w. (Two stages and one worker: the textbook E * max + min.) The
// consumer's stages count at their CPU: nothing else runs beside them then.
double EpochEndSeconds(const Profile& profile, const Configuration& config, const std::vector<bool>& counted,
                       double step, const Prediction& prediction) {
  double consumer = step;
  for (size_t i = 0; i < profile.stages.size(); ++i) {
    if (counted[i] && RunsOnConsumerThread(profile, config, i))
      consumer += profile.stages[i].cpu_seconds_per_output;
  }
  double input_rate = kInfinity;
  for (const Bound& bound : prediction.bounds) {
    if (bound.kind != BoundKind::kConsumer && bound.kind != BoundKind::kDemand) {
      input_rate = std::min(input_rate, bound.throughput);
    }
  }
  double input = input_rate > 0 && std::isfinite(input_rate) ? 1.0 / input_rate : 0.0;
  double seconds = 0;
  for (size_t g = 0; g < profile.groups.size(); ++g) {
    seconds += BusyWorkers(profile, config, g) * std::min(input, consumer);
  }
  return seconds;
}

// Seconds from an epoch's start to its first output at `config`, the
// iterator's making aside: every stage that runs in the epoch (not replayed
// from a cache) hands on the V_i elements of that output, its p_i workers
// side by side.
double FirstOutputSeconds(const Profile& profile, const Configuration& config) {
  double seconds = 0;
  for (size_t i = 0; i < profile.stages.size(); ++i) {
    if (IsCached(profile, config, i) || !StageRuns(profile, config, i)) continue;
    const StageProfile& stage = profile.stages[i];
    const int parallelism = stage.parallel ? config.parallelism[i] : 1;
    seconds += stage.visit_ratio * LatencyAt(stage, parallelism) / parallelism;
  }
  return seconds;
}

// What a loop that makes a new iterator per epoch waits each epoch before
// its first output. Measured at the traced knobs, it is the iterators'
// making, paid whatever the knobs, and the rest: the last epoch's pipeline
// torn down (TensorFlow joins its ops' threads) and this one's filled to
// its first output. That rest belongs to the stages that run each epoch,
// and scales with their time to a first output: a cache's replays run
// none of the stages before it. (Priced whole, the plan that caches the
// decoded images of examples/tfdata/train_tf.py was promised 233.7
// batches/s and ran 412 after its first epoch.)
double EpochStartSeconds(const Profile& profile, const Configuration& config) {
  if (!profile.epoch_iterator_seconds) return profile.epoch_start_seconds;
  const double making = std::min(*profile.epoch_iterator_seconds, profile.epoch_start_seconds);
  const double rest = profile.epoch_start_seconds - making;
  const double traced = FirstOutputSeconds(profile, ObservedConfiguration(profile));
  if (rest <= 0 || traced <= 0) return profile.epoch_start_seconds;
  return making + rest * FirstOutputSeconds(profile, config) / traced;
}

// Each epoch of E outputs also waits for its workers' start-up, f + w * s
// seconds for w > 0 workers (once per run, spread over its epochs, when
// persistent), for its start where the loop makes a new iterator per epoch
// (EpochStartSeconds), and for its ends (EpochEndSeconds).
void ApplyEpochCosts(const Profile& profile, const Configuration& config, const std::vector<bool>& counted,
                     double step, Prediction& prediction) {
  if (!profile.outputs_per_epoch || *profile.outputs_per_epoch <= 0 || prediction.throughput <= 0) return;
  double startup = EpochStartSeconds(profile, config);
  for (size_t g = 0; g < profile.groups.size(); ++g) {
    const WorkerGroup& group = profile.groups[g];
    bool persistent = config.group_persistent.empty() ? group.persistent : config.group_persistent[g];
    const double workers = GroupWorkers(profile, config, g);
    double per_epoch =
        workers > 0 ? group.startup_seconds_fixed + workers * group.startup_seconds_per_worker : 0;
    startup += persistent ? per_epoch / std::max(1.0, profile.epochs) : per_epoch;
  }
  double ends = EpochEndSeconds(profile, config, counted, step, prediction);
  if (startup + ends <= 0) return;
  double steady_epoch = *profile.outputs_per_epoch / prediction.throughput;
  prediction.startup_seconds_per_epoch = startup;
  prediction.epoch_end_seconds = ends;
  prediction.throughput = *profile.outputs_per_epoch / (steady_epoch + startup + ends);
  if (startup > steady_epoch) prediction.binding = {BoundKind::kStartup, std::nullopt, prediction.throughput};
}

}  // namespace

double EpochOutputsForSteadyRate(const Prediction& prediction, double within) {
  // E / (E / X + c) >= (1 - within) X  <=>  E >= X c (1 - within) / within.
  const double per_epoch = prediction.startup_seconds_per_epoch + prediction.epoch_end_seconds;
  if (per_epoch <= 0 || prediction.steady_throughput <= 0 || !(within > 0 && within < 1)) return 0;
  return std::ceil(prediction.steady_throughput * per_epoch * (1 - within) / within);
}

const char* BoundKindName(BoundKind kind) {
  switch (kind) {
    case BoundKind::kCpu:
      return "cpu";
    case BoundKind::kConcurrency:
      return "concurrency";
    case BoundKind::kStorage:
      return "storage";
    case BoundKind::kDemand:
      return "demand";
    case BoundKind::kConsumer:
      return "consumer";
    case BoundKind::kStartup:
      return "startup";
  }
  return "unknown";
}

Configuration ObservedConfiguration(const Profile& profile) {
  Configuration config;
  for (const StageProfile& stage : profile.stages) config.parallelism.push_back(stage.parallelism);
  config.cores = profile.cores;
  if (profile.cache_stage && *profile.cache_stage > 0) config.cache_after = *profile.cache_stage - 1;
  config.storage_bytes_per_second = profile.storage_bytes_per_second;
  config.step_time_seconds = profile.step_time_seconds;
  for (const WorkerGroup& group : profile.groups) {
    config.group_workers.push_back(group.workers);
    config.group_buffer.push_back(group.buffer_per_worker);
    config.group_persistent.push_back(group.persistent);
    config.group_fetch_threads.push_back(group.fetch_threads);
  }
  if (!profile.groups.empty() || std::any_of(profile.stages.begin(), profile.stages.end(),
                                             [](const StageProfile& s) { return s.switchable; })) {
    for (const StageProfile& stage : profile.stages) config.stage_enabled.push_back(stage.enabled);
  }
  return config;
}

bool StageRuns(const Profile& profile, const Configuration& config, size_t index) {
  const StageProfile& stage = profile.stages[index];
  bool enabled = config.stage_enabled.empty() ? stage.enabled : config.stage_enabled[index];
  if (!enabled) return false;
  return !stage.needs_workers_of || GroupWorkers(profile, config, *stage.needs_workers_of) > 0;
}

bool RunsOnConsumerThread(const Profile& profile, const Configuration& config, size_t index) {
  const StageProfile& stage = profile.stages[index];
  return stage.on_consumer_thread || (stage.group && GroupWorkers(profile, config, *stage.group) == 0);
}

bool FetchReadsInRounds(int workers, int buffer) { return workers <= 0 || buffer < 2; }

double WorkerMemoryBytes(const Profile& profile, const Configuration& config) {
  double bytes = profile.base_memory_bytes;
  for (size_t g = 0; g < profile.groups.size(); ++g) {
    const WorkerGroup& group = profile.groups[g];
    double workers = GroupWorkers(profile, config, g);
    int buffer = config.group_buffer.empty() ? group.buffer_per_worker : config.group_buffer[g];
    bytes += workers *
             (group.memory_bytes_per_worker + buffer * profile.stages[group.last_stage].bytes_per_element);
    // Each fetch thread holds a sample in flight: in every worker, or in the
    // consumer's process when there are none.
    int threads = GroupFetchThreads(profile, config, g);
    if (threads > 1) bytes += std::max(1.0, workers) * threads * group.memory_bytes_per_fetch_thread;
  }
  return bytes;
}

Prediction Predict(const Profile& profile, const Configuration& config) {
  PIPETUNE_CHECK(config.parallelism.size() == profile.stages.size());
  PIPETUNE_CHECK(config.group_workers.empty() || config.group_workers.size() == profile.groups.size());
  PIPETUNE_CHECK(config.stage_enabled.empty() || config.stage_enabled.size() == profile.stages.size());
  Prediction prediction;
  const size_t n = profile.stages.size();
  // counted[i]: the stage runs and is not replayed from a cache; its cost counts.
  std::vector<bool> cached(n, false), counted(n, false);
  double cpu_per_output = 0;
  for (size_t i = 0; i < n; ++i) {
    const StageProfile& stage = profile.stages[i];
    PIPETUNE_CHECK(config.parallelism[i] >= 1);
    int parallelism = stage.parallel ? config.parallelism[i] : 1;
    cached[i] = IsCached(profile, config, i);
    counted[i] = !cached[i] && StageRuns(profile, config, i);
    StagePrediction stage_prediction;
    stage_prediction.cached = cached[i];
    // Stages on shared threads (a group's workers, the consumer's) have no
    // bound of their own: their thread's bound is added below.
    bool own_thread = !stage.group && !RunsOnConsumerThread(profile, config, i);
    stage_prediction.concurrency_throughput =
        counted[i] && own_thread ? ConcurrencyBound(stage, parallelism) : kInfinity;
    if (counted[i]) cpu_per_output += stage.cpu_seconds_per_output;
    prediction.stages.push_back(stage_prediction);
    prediction.bounds.push_back({BoundKind::kConcurrency, i, stage_prediction.concurrency_throughput});
  }
  AddGroupBounds(profile, config, counted, prediction);
  double stage_cores = StageCores(profile, config);
  const double overhead_per_output = GroupOverheadCpu(profile, config);
  cpu_per_output += profile.consumer_cpu_seconds_per_output + overhead_per_output;
  prediction.bounds.push_back(
      {BoundKind::kCpu, std::nullopt, cpu_per_output > 0 ? stage_cores / cpu_per_output : kInfinity});
  double storage = kInfinity;
  if (config.storage_bytes_per_second && profile.storage_bytes_per_output > 0 && profile.storage_stage &&
      !cached[*profile.storage_stage]) {
    storage = *config.storage_bytes_per_second / profile.storage_bytes_per_output;
  }
  prediction.bounds.push_back({BoundKind::kStorage, profile.storage_stage, storage});
  double step = config.step_time_seconds && *config.step_time_seconds > 0 ? *config.step_time_seconds : 0.0;
  prediction.bounds.push_back({BoundKind::kDemand, std::nullopt, step > 0 ? 1.0 / step : kInfinity});
  AddConsumerBound(profile, config, counted, step, prediction);
  AddHeldStepBound(profile, config, counted, step, stage_cores, prediction);

  // The smallest bound binds; on a tie the earlier one (a stage before the
  // shared resources) is named, since it is the one a knob can move.
  prediction.binding = prediction.bounds.front();
  for (const Bound& bound : prediction.bounds) {
    if (bound.throughput < prediction.binding.throughput) prediction.binding = bound;
  }
  prediction.throughput = std::isfinite(prediction.binding.throughput) ? prediction.binding.throughput : 0.0;
  prediction.steady_throughput = prediction.throughput;
  ApplyEpochCosts(profile, config, counted, step, prediction);

  prediction.cores_used =
      profile.other_cpu_cores +
      prediction.throughput * (profile.consumer_cpu_seconds_per_output + overhead_per_output);
  for (size_t i = 0; i < n; ++i) {
    StagePrediction& stage_prediction = prediction.stages[i];
    const StageProfile& stage = profile.stages[i];
    double all_cores = counted[i] && stage.cpu_seconds_per_output > 0
                           ? stage_cores / stage.cpu_seconds_per_output
                           : kInfinity;
    stage_prediction.max_throughput = std::min(stage_prediction.concurrency_throughput, all_cores);
    stage_prediction.cores_used = counted[i] ? prediction.throughput * stage.cpu_seconds_per_output : 0.0;
    stage_prediction.utilisation = std::isfinite(stage_prediction.concurrency_throughput)
                                       ? prediction.throughput / stage_prediction.concurrency_throughput
                                       : 0.0;
    prediction.cores_used += stage_prediction.cores_used;
  }
  prediction.bottleneck_stage = Bottleneck(profile, prediction, counted);
  return prediction;
}

std::optional<std::string> CacheNotAllowed(const Profile& profile, size_t index) {
  if (index >= profile.stages.size()) return "there is no such stage";
  if (profile.stages[index].join_input) {
    // A cache is priced as replaying every stage before it; here some of
    // those are another input's, which would still run.
    return fmt::format(
        "stage \"{}\" is in a second or later input of a zip or concatenate: the stages before it are not "
        "all its input",
        profile.stages[index].name);
  }
  for (size_t i = 0; i <= index; ++i) {
    const StageProfile& stage = profile.stages[i];
    if (stage.random) {
      return fmt::format(
          "stage \"{}\" is random (its output changes every epoch), so nothing at or after it "
          "may be cached",
          stage.name);
    }
    if (i > 0 && (stage.op == Op::kRepeat || stage.op == Op::kTake)) {
      return fmt::format("stage \"{}\" ({}) comes before it, so an epoch has no fixed content", stage.name,
                         stage.op_name);
    }
  }
  std::optional<double> bytes = CacheBytes(profile, index);
  if (!bytes)
    return std::string("the epoch's size is unknown (an endless source, or the run never finished one)");
  if (profile.memory_budget_bytes && *bytes > static_cast<double>(*profile.memory_budget_bytes)) {
    return fmt::format("it would hold {} of the {} memory budget", FormatBytes(*bytes),
                       FormatBytes(static_cast<double>(*profile.memory_budget_bytes)));
  }
  return std::nullopt;
}

std::optional<double> CacheBytes(const Profile& profile, size_t index) {
  std::optional<double> elements = ElementsPerEpoch(profile, index);
  if (!elements) return std::nullopt;
  return *elements * profile.stages[index].bytes_per_element;
}

int ParallelismForBestThroughput(const Profile& profile, const Configuration& config, size_t index,
                                 int max_parallelism, double tolerance) {
  PIPETUNE_CHECK(index < profile.stages.size());
  int current = config.parallelism[index];
  if (!profile.stages[index].parallel) return current;
  Configuration trial = config;
  std::vector<double> throughput(static_cast<size_t>(max_parallelism) + 1, 0.0);
  double best = 0;
  for (int p = 1; p <= max_parallelism; ++p) {
    trial.parallelism[index] = p;
    throughput[static_cast<size_t>(p)] = Predict(profile, trial).throughput;
    best = std::max(best, throughput[static_cast<size_t>(p)]);
  }
  double current_throughput = current <= max_parallelism ? throughput[static_cast<size_t>(current)] : 0.0;
  if (current_throughput >= best * (1.0 - tolerance)) return current;
  for (int p = 1; p <= max_parallelism; ++p) {
    if (throughput[static_cast<size_t>(p)] >= best * (1.0 - tolerance)) return p;
  }
  return current;
}

}  // namespace pipetune::models

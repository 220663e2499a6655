// The operational-analysis rate model (docs/model.md):
// from a Profile, the throughput X (pipeline outputs per second) any
// configuration can reach, and the bound that stops it.
//
//   CPU:          X * sum_i c_i <= C - other          (cores the stages may use)
//   concurrency:  X * V_i * L_i(p_i) <= p_i           (Little's law, each stage)
//   storage:      X * bytes_read_per_output <= BW     (when BW is known)
//   demand:       X <= 1 / step_time                  (the consumer)
//   worker group: X * sum_{i in g} V_i * L_i <= w_g   (stages sharing w_g workers)
//   consumer:     X * (step + sum_{i on it} V_i L_i) <= 1   (stages on its thread)
//   held step:    X * (W + (B - D) * step) <= B   (a step of threads of its own)
//
// The held step: a consumer's step that runs threads of its own (torch's
// intra-op pool; Profile::consumer_step_cores over 1.2) holds h whole cores
// while it runs, so the work off the consumer's thread (W per output: the
// workers' stages and their own CPU) runs on D = min(lanes, C - h) cores
// during the step and on B = min(lanes, C) between steps, lanes being the
// workers. It counts as a CPU bound.
//
// CPU counts the consumer's CPU per output too, where the profile measured
// it, and each worker group's own CPU outside its stages while it has
// workers (WorkerGroup::overhead_cpu_seconds_per_output). A worker group's
// epoch of E outputs also pays its workers' start-up (f + w * s for w > 0
// workers: a fixed part and one per worker; once per run, spread over its
// epochs, when persistent) and its fill and drain (the first and last w
// outputs arrive side by side, and the faster side, input at 1/X per output
// or the consumer at c, waits for them):
//   X_epoch = E / (E / X + f + w * s + w * min(1 / X, c)).
//
// X is the smallest of these bounds; the one that gives it binds. A cache
// after stage k removes, once its first epoch is stored, the CPU, latency and
// storage cost of every stage up to k; the model predicts that steady state.
// L_i(p) follows the stage's scaling fit (linear unless fitted). CPU cost per
// element is taken as independent of parallelism.
//
// Pure functions: no I/O, no threads, no clocks.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "pipetune/models/profile.h"

namespace pipetune::models {

// The knobs a prediction is for. Build one with ObservedConfiguration and
// change what you want to ask about.
struct Configuration {
  std::vector<int> parallelism;  // per stage of the profile, in its order; >= 1
  double cores = 0;              // cores available to the pipeline process
  // A cache placed right after this stage (its output is stored in the first
  // epoch and replayed after). An existing cache stage is expressed as the
  // stage before it. nullopt: no cache.
  std::optional<size_t> cache_after;
  std::optional<double> storage_bytes_per_second;
  std::optional<double> step_time_seconds;  // nullopt: the consumer drains
  // Per worker group (empty: as traced): workers (0: on the consumer's
  // thread), outputs each may hold ready, persistence.
  std::vector<int> group_workers;
  std::vector<int> group_buffer;
  std::vector<bool> group_persistent;
  std::vector<int> group_fetch_threads;  // per worker group (empty: as traced); >= 1
  // Per stage (empty: as traced): whether a switchable stage runs.
  std::vector<bool> stage_enabled;
};

// The configuration the profile watched.
Configuration ObservedConfiguration(const Profile& profile);

enum class BoundKind {
  kCpu,          // the cores are all in use
  kConcurrency,  // a stage's workers are all busy (Little's law)
  kStorage,      // storage bandwidth
  kDemand,       // the consumer takes outputs no faster
  kConsumer,     // the consumer's thread: its step and the stages it runs itself
  kStartup,      // worker start-up takes most of each epoch
};

// "cpu", "concurrency", "storage", "demand": the names JSON reports use.
const char* BoundKindName(BoundKind kind);

struct Bound {
  BoundKind kind = BoundKind::kCpu;
  std::optional<size_t> stage;  // kConcurrency (and kStorage: the reading stage)
  double throughput = 0;        // the X at which it binds; +inf when it cannot bind
  std::optional<size_t> group;  // kConcurrency of a worker group (`stage`: its costliest)
};

struct StagePrediction {
  // The stage's own ceiling, in pipeline outputs/s: the concurrency bound at
  // its parallelism, and no more than the CPU bound if it had every core.
  double max_throughput = 0;
  double concurrency_throughput = 0;  // p_i / (V_i L_i(p_i))
  double cores_used = 0;              // X * c_i
  double utilisation = 0;             // X / concurrency_throughput: busy share of its workers
  bool cached = false;                // its cost is removed by the cache
};

struct Prediction {
  double throughput = 0;
  Bound binding;              // the smallest bound
  std::vector<Bound> bounds;  // every bound: stages in order, then cpu, storage, demand
  std::vector<StagePrediction> stages;
  double cores_used = 0;  // stages' CPU at `throughput`, plus the other load
  // The stage to blame: the stage whose concurrency bound binds; for the CPU
  // bound the stage with the largest CPU cost per output; for storage the
  // reading stage; for demand none (the pipeline keeps up).
  std::optional<size_t> bottleneck_stage;
  // Without the epochs' costs: the bounds' minimum. Equal to `throughput`
  // when the pipeline has no worker group or no known epoch size.
  double steady_throughput = 0;
  double startup_seconds_per_epoch = 0;
  // Each epoch's fill and drain: its first and last outputs arrive one per
  // worker, side by side, and one side waits for the other (rate_model.cc,
  // EpochEndSeconds).
  double epoch_end_seconds = 0;
};

// Predicts X for `config`. `config.parallelism` must have one entry per
// stage (a programming error otherwise). A stage whose elements the window
// never saw (zero elements) adds no cost.
Prediction Predict(const Profile& profile, const Configuration& config);

// How long an epoch must be (in outputs) before its start-up, fill and
// drain cost less than `within` of the steady rate: the prediction's
// throughput then holds within that for any longer epoch. 0 when the
// prediction has no per-epoch cost (no worker group, unknown epoch size).
double EpochOutputsForSteadyRate(const Prediction& prediction, double within = 0.05);

// Whether stage `index` runs in `config`, and whether on the consumer's thread.
bool StageRuns(const Profile& profile, const Configuration& config, size_t index);
bool RunsOnConsumerThread(const Profile& profile, const Configuration& config, size_t index);

// Whether a worker group's fetch threads read each output's samples in
// rounds that start together: on the consumer's thread (0 workers) or in a
// worker that holds one index list at a time (buffer 1). A worker holding
// its next list (buffer >= 2) reads it as soon as a thread is free.
bool FetchReadsInRounds(int workers, int buffer);

// What the worker groups hold in `config`: each worker's process and the
// outputs in flight (workers x buffer x bytes of the group's output), plus
// the profile's base memory. 0 plus the base without groups.
double WorkerMemoryBytes(const Profile& profile, const Configuration& config);

// Why a cache after stage `index` is not allowed, or nullopt when it is: it
// must lie before the first random stage, the epoch must be finite and of a
// known size, and no repeat or take may precede it.
std::optional<std::string> CacheNotAllowed(const Profile& profile, size_t index);

// Bytes a cache after stage `index` holds once filled: elements per epoch at
// the stage times its bytes per element; nullopt when the epoch size is unknown.
std::optional<double> CacheBytes(const Profile& profile, size_t index);

// The smallest parallelism of stage `index` (searching up to `max_parallelism`)
// that reaches the best throughput the other bounds allow, within `tolerance`
// (relative). Returns the stage's current parallelism when more would not
// help, or when the stage has no parallelism knob.
int ParallelismForBestThroughput(const Profile& profile, const Configuration& config, size_t index,
                                 int max_parallelism = 256, double tolerance = 0.01);

}  // namespace pipetune::models

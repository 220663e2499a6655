// What the tuner takes and what it returns (docs/tuner.md): a profile, the
// budgets and an objective in; a plan out, with every knob's old and new
// value, the predicted throughput before and after, the memory and threads it
// uses, the bound that binds and one line of reason per knob. The solver
// (solver.h) makes plans; rewrite.h turns one into a config;
// plan_report.h prints one.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "pipetune/models/config.h"
#include "pipetune/models/memory_model.h"
#include "pipetune/models/profile.h"
#include "pipetune/models/queue_model.h"
#include "pipetune/models/rate_model.h"

namespace pipetune::tuner {

enum class Objective {
  kMax,     // the highest throughput within the budgets
  kDemand,  // the consumer's rate with the fewest cores, then the least memory
};

const char* ObjectiveName(Objective objective);  // "max", "demand"

// The budgets a plan must stay within.
struct Resources {
  double cores = 0;                                // CPU cores the pipeline process may use (> 0)
  uint64_t memory_bytes = 0;                       // for buffers and memory caches (> 0)
  std::optional<double> storage_bytes_per_second;  // nullopt: the profile's, else unbounded
  // A directory for disk caches; nullopt: no cache on disk. disk_free_bytes
  // is the space there when known; a disk cache must fit in it.
  std::optional<std::string> disk_cache_dir;
  std::optional<uint64_t> disk_free_bytes;
  // Threads of all stages together (map / read_file workers, one per other
  // stage). AUTOTUNE users hit thread explosions; this stops them.
  int max_threads = 256;
  // false (--no-cache): the plan places no cache of its own: the data
  // changes between epochs in ways the trace cannot show, or the stages
  // themselves are what is measured (bench/image/compare.sh).
  bool caches_allowed = true;
  // Where each budget came from ("--cores", "the config's resources", "the
  // host (trace header)"), for the plan's text.
  std::string cores_source;
  std::string memory_source;
};

// Everything the solver knows about the pipeline.
struct TuneInput {
  models::Profile profile;
  // The config as it ran (the trace header's copy). Needed to rewrite, and
  // for the sizes of shuffle buffers; without it the plan can only be printed.
  std::optional<models::PipelineConfig> config;
  // The spread of the pipeline's output inter-arrival times, when measured;
  // the queue model assumes cv 1 (Poisson-like) otherwise.
  std::optional<models::ArrivalSpread> output_spread;
  // Whether map stage `second` folds into the pass of the map `first` before
  // it once the two are one stage (the engine's chain folds: normalize into a
  // resampling function's output loop): the same output with one pass and
  // one hand-off less, so that fusion needs no predicted gain over the
  // model's error (fusion.h). Unset: no pair is known to fold.
  std::function<bool(const models::StageConfig& first, const models::StageConfig& second)> folds;
};

enum class CacheKind { kNone, kMemory, kDisk };

const char* CacheKindName(CacheKind kind);  // "none", "memory", "disk"

// Where a cache goes: right after stage `after` (an index into the profile's
// stages).
struct CacheChoice {
  CacheKind kind = CacheKind::kNone;
  size_t after = 0;

  bool operator==(const CacheChoice& other) const {
    return kind == other.kind && (kind == CacheKind::kNone || after == other.after);
  }
};

// One stage of a planned pipeline.
struct PlannedStage {
  std::string name;
  models::Op op = models::Op::kMap;
  std::string op_name;
  std::optional<size_t> profile_index;  // nullopt: inserted by the plan
  bool parallel = false;                // parallelism is a knob
  // 0: no cap. Otherwise the stage's fitted scaling says every worker beyond
  // this many adds less than kMinWorkerGain of one worker's throughput.
  int useful_parallelism = 0;
  int parallelism = 1;
  int old_parallelism = 1;
  std::optional<int64_t> buffer;  // prefetch stages
  std::optional<int64_t> old_buffer;
  std::optional<models::CacheLocation> location;  // cache stages
  std::optional<models::CacheLocation> old_location;
  bool cached = false;  // replayed by the cache after the first epoch
  // Switchable stages (pin_memory): whether it runs, and ran in the trace.
  bool enabled = true;
  bool old_enabled = true;
  double bytes_per_element = 0;        // S of its output
  double input_bytes_per_element = 0;  // S of its input
  double state_bytes = 0;              // shuffle buffer, partial batch
  double cache_bytes = 0;              // cache stages: the epoch they hold
  // Inserted stages: their args (the shuffle a cache brings to keep a
  // per-epoch order: its buffer and seed). Stages of the run keep theirs.
  Json args = Json::object();

  bool inserted() const { return !profile_index.has_value(); }
};

// One worker group's settings (a DataLoader's num_workers, prefetch_factor,
// persistent_workers), as planned and as traced: the group's knobs, as
// parallelism and buffers are a stage's.
struct PlannedGroup {
  int workers = 0;  // 0: its stages run on the consumer's thread
  int old_workers = 0;
  int buffer_per_worker = 1;  // outputs each worker may hold ready
  int old_buffer_per_worker = 1;
  bool persistent = false;
  bool old_persistent = false;
  int fetch_threads = 1;  // threads each worker reads an output's samples with
  int old_fetch_threads = 1;
};

// What a plan changes on a stage: one of its knobs, or the stage itself
// (inserted or removed).
// kNamed: a worker group's or a switchable stage's knob, which the user sets
// by the name in `stage` (num_workers, prefetch_factor, ...).
enum class Knob { kParallelism, kBuffer, kLocation, kStage, kNamed };
const char* KnobName(Knob knob);  // "parallelism", "buffer", "location", "stage", "setting"

// One knob (or a stage inserted or removed), before and after.
struct KnobChange {
  std::string stage;
  Knob knob = Knob::kParallelism;
  std::string old_value;  // "-" when absent
  std::string new_value;  // "-" when removed
  bool changed = false;
  std::string reason;  // one line
};

// What the solver found for one cache choice, for the plan's explanation.
struct CacheOption {
  CacheChoice choice;
  std::string description;  // "no cache", "memory cache after \"decode\""
  bool feasible = false;
  double throughput = 0;  // the best under the budgets (feasible only)
  double cores_needed = 0;
  double memory_bytes = 0;
  std::string note;     // why not admissible or not feasible, or what limits it
  bool chosen = false;  // the plan is this option
};

// A change of the pipeline's graph that the plan makes before its knobs
// (fusion.h): the stages it replaces, the first keeping its name.
struct GraphRewrite {
  std::string kind;                 // "fuse_decode_crop"
  std::vector<std::string> stages;  // {"decode", "augment"}
  std::string description;          // one line: what the stages become
  double predicted_gain = 1;        // tuned throughput with the rewrite over without
  std::string reason;               // one line: why, with the numbers it was priced from
};

// Where no directory for disk caches was given (--cache-dir) and a cache on
// disk would beat the plan by kDiskCacheHintGain or more: the best such
// cache, priced by the same candidate as a plan with --cache-dir, so that a
// user whose memory is short learns what a directory would buy.
inline constexpr double kDiskCacheHintGain = 1.2;
struct DiskCacheHint {
  std::string after;                 // the stage the cache would follow
  double throughput = 0;             // its plan's, after the first epoch (steady state)
  double gain = 1;                   // over the plan without it
  double cache_bytes = 0;            // the epoch it would hold
  uint64_t memory_budget_bytes = 0;  // the budget a memory cache there did not fit
};

struct Plan {
  std::string pipeline_name;
  Objective objective = Objective::kMax;
  Resources resources;
  std::vector<PlannedStage> stages;         // the tuned pipeline, in order
  std::vector<std::string> removed_stages;  // stages of the run the plan drops (a moved cache)
  CacheChoice cache;
  std::optional<size_t> cache_stage;  // index into `stages` of the cache stage, if any
  std::vector<KnobChange> knobs;
  std::vector<GraphRewrite> rewrites;  // applied to the config before the knobs

  double measured_throughput = 0;          // of the traced run
  double predicted_throughput_before = 0;  // the model on the traced config
  double predicted_throughput = 0;         // after tuning (steady state)
  models::BoundKind binding = models::BoundKind::kCpu;
  std::optional<std::string> binding_stage;
  std::string binding_reason;               // what stops the plan going faster
  std::optional<double> demand_throughput;  // 1 / step time, when the consumer has one
  bool demand_met = false;

  double cores_used = 0;  // at the predicted throughput, other process load included
  int cores_needed = 0;   // whole cores the plan needs (demand: with its headroom)
  models::MemoryEstimate memory;
  int threads = 0;

  std::vector<CacheOption> cache_options;
  std::optional<DiskCacheHint> disk_cache_hint;
  std::vector<std::string> notes;  // budgets, fallbacks, assumptions
  // Plans for profiles with worker groups (a DataLoader): the configuration
  // chosen, whose group and stage settings the knobs list by name.
  std::optional<models::Configuration> configuration;
};

}  // namespace pipetune::tuner

// The profile: what a pipeline did over a steady window of a run, per stage,
// in the terms of the rate model (docs/model.md).
//
// Two layers. A WindowMeasurement holds raw counter differences over the
// window, as a trace reader (pipetune::analyzer) extracts them. MakeProfile
// turns it, with the pipeline config, into a Profile: the model's per-stage
// parameters (CPU cost, latency, bytes, local and visit ratios) with every
// assumption it had to make written down. The rate model (rate_model.h)
// predicts throughput from a Profile for any configuration.
//
// Units: seconds, bytes, elements; throughput in pipeline outputs per second.
// Pure functions over plain structs: no I/O, no threads, no clocks.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "pipetune/base/status.h"
#include "pipetune/models/config.h"
#include "pipetune/models/scaling.h"

namespace pipetune::models {

// One stage's counters over the window, summed over its workers.
struct StageMeasurement {
  std::string name;
  std::string op;                  // as the trace names it ("map", "batch", ...)
  int parallelism = 1;             // workers during the window
  double elements = 0;             // produced (passed downstream)
  double consumed = 0;             // taken from the stage before
  double bytes = 0;                // bytes of the elements produced
  double cpu_seconds = 0;          // CPU time of the stage's threads
  double work_seconds = 0;         // wall time in the stage's own work
  double wait_input_seconds = 0;   // blocked on an empty input
  double wait_output_seconds = 0;  // blocked on a full output buffer
  double mean_buffer_bytes = 0;    // its output buffer, averaged over the window
  // Per-worker wall seconds per element measured at other parallelism levels
  // (other windows of the same trace, or other traces of the same pipeline),
  // for the scaling fit. The window's own level need not be repeated here.
  std::vector<ScalingPoint> scaling_points;
};

// Everything measured over one window of a run.
struct WindowMeasurement {
  std::string pipeline_name;
  double begin_seconds = 0;  // window start, seconds after the trace started
  double end_seconds = 0;
  std::string window_reason;             // why the window starts and ends where it does
  std::vector<StageMeasurement> stages;  // pipeline order
  double outputs = 0;                    // consumer steps (pipeline outputs) in the window
  double consumer_wait_seconds = 0;      // consumer blocked waiting for an output
  double consumer_step_seconds = 0;      // consumer busy in its steps (e.g. the GPU step)
  double process_cpu_seconds = -1;       // whole process; < 0: not measured
  double storage_bytes_read = -1;        // fetched from storage (not the page cache); < 0: unknown
  double host_cores = 0;                 // cores the process could use (affinity, quota)
  bool cache_filled = false;             // a cache stage had finished its first epoch before the window
  // Elements the first stage produces per epoch when the trace shows it
  // (the source ran dry); the config's `range` count is used otherwise.
  std::optional<double> source_elements_per_epoch;
};

// A pool of workers that each run a run of consecutive stages one after
// another, element by element: a PyTorch DataLoader's worker processes, each
// of which loads a sample, runs every transform on it and collates a batch.
// The group's stages share its workers, so the group has one concurrency
// bound, X * sum over its stages of V_i * L_i <= workers, in place of the
// stages' own (rate_model.h).
struct WorkerGroup {
  std::string name;        // "workers"
  size_t first_stage = 0;  // the group is stages [first_stage, last_stage]
  size_t last_stage = 0;
  int workers = 1;                   // as traced; 0: its stages ran on the consumer's thread
  bool may_run_on_consumer = false;  // 0 workers is a configuration (num_workers=0)
  int buffer_per_worker = 2;         // outputs each worker may hold ready (prefetch_factor)
  bool persistent = false;           // workers start once per run rather than every epoch
  // Wall seconds an epoch waits for the workers it starts: a fixed part
  // (making the iterator, the last worker's own way to ready) and a part per
  // worker (each is forked or spawned in turn), so w workers start in
  // fixed + w * per_worker; nothing with no workers. Paid every epoch unless
  // persistent.
  double startup_seconds_fixed = 0;
  double startup_seconds_per_worker = 0;
  double memory_bytes_per_worker = 0;  // one worker's resident memory
  // The most workers that get work (0: no limit): a stream split into that
  // many shards, each read whole by one worker, leaves every further worker
  // idle. Idle workers add no throughput but are still started and still
  // hold their memory, so the model counts them there and nowhere else.
  // `max_workers_reason` says why, in the user's words, for plans.
  int max_workers = 0;
  std::string max_workers_reason;
  // CPU seconds per output the workers spend outside every stage (a
  // DataLoader worker's fetch loop, pickling each batch for the consumer):
  // counted in the CPU bound only while the group has workers, since with
  // none its stages run inline on the consumer's thread and that work is
  // not done. Kept out of the stages so that each stage's cost is its own
  // (the CI gate judges it).
  double overhead_cpu_seconds_per_output = 0;
  // The names a user sets these by, for reports, what-ifs and plans
  // ("num_workers", "prefetch_factor", "persistent_workers"); empty: none.
  std::string workers_knob;
  std::string buffer_knob;
  std::string persistent_knob;

  // Fetch threads: each worker (or the consumer's thread, with 0 workers)
  // reads an output's `fetch_samples` samples from `fetch_threads` threads,
  // each sample running the group's stages [first_stage, fetch_last_stage];
  // the rest of the group (collate) runs once the samples are in. A
  // sample's wait off the CPU (storage) overlaps across the threads; the
  // part of its CPU that holds Python's GIL (`fetch_gil_seconds_per_sample`)
  // does not, within one process. Each thread holds one sample in flight
  // (`memory_bytes_per_fetch_thread`). No knob name: the group has no threads
  // to set (an IterableDataset's stream is read by one thread).
  int fetch_threads = 1;
  int fetch_samples = 1;
  size_t fetch_last_stage = 0;
  double fetch_gil_seconds_per_sample = 0;
  double fetch_cpu_seconds_per_sample = 0;   // all of a sample's CPU, GIL-held or not: for plans to say
  double fetch_wait_seconds_per_sample = 0;  // a sample's time off the CPU: for plans to say
  double memory_bytes_per_fetch_thread = 0;
  std::string fetch_threads_knob;
};

// A stage as the model sees it.
struct StageProfile {
  std::string name;
  std::optional<Op> op;  // nullopt: an op this version does not know
  std::string op_name;
  std::string fn;
  int parallelism = 1;    // p_i: workers (1 for sequential stages)
  bool parallel = false;  // its parallelism is a knob (map, read_file)
  bool random = false;    // output changes between epochs: no cache at or after it
  // In an input of a zip or concatenate after the first (the config's
  // "join_input"): the stages before it in the one chain are not all its
  // input, so a cache right after it cannot be priced (CacheNotAllowed).
  bool join_input = false;

  // Measured over the window (E_i, CPU_i, ...), as in StageMeasurement.
  double elements = 0;
  double consumed = 0;
  double bytes = 0;
  double cpu_seconds = 0;
  double work_seconds = 0;
  double wait_input_seconds = 0;
  double wait_output_seconds = 0;
  double mean_buffer_bytes = 0;

  // Model parameters.
  double cpu_seconds_per_element = 0;  // CPU_i / E_i
  // L_i: wall seconds of own work per element per worker, with the time the
  // threads waited for a CPU (the cores were oversubscribed) taken out: the
  // latency the stage would show with a core to itself.
  double latency_seconds = 0;
  double measured_latency_seconds = 0;  // work_seconds / E_i, as measured
  double bytes_per_element = 0;         // S_i
  double local_ratio = 1;               // r_i: elements consumed per element produced
  bool local_ratio_measured = false;    // from counters rather than the config
  double visit_ratio = 1;               // V_i: elements produced per pipeline output
  double cpu_seconds_per_output = 0;    // c_i = CPU_i / E_i * V_i
  // Off-CPU time dominates its work (I/O, remote calls): it needs workers,
  // not cores. L_i > 2 * CPU_i / E_i.
  bool latency_bound = false;
  // How its latency changes with parallelism; linear (constant per-worker
  // latency) unless points at two or more levels were measured.
  UslFit scaling;

  // Where it runs, when not on threads of its own. `group`: one of the
  // profile's worker groups runs it. `on_consumer_thread`: the consumer's own
  // thread runs it between its steps (a DataLoader's transfer), and so does
  // every stage of a group configured with 0 workers.
  std::optional<size_t> group;
  bool on_consumer_thread = false;
  // Runs only while `needs_workers_of` has workers: a hand-off between
  // processes (unpickling a worker's batch).
  std::optional<size_t> needs_workers_of;
  // A stage a configuration may switch on or off (pin_memory): `enabled` is
  // whether the traced run had it, and `switch_knob` the user's name for it.
  // A stage the run did not have carries estimated costs.
  bool switchable = false;
  bool enabled = true;
  bool may_switch_off = false;  // a plan may turn it off (it buys nothing the model cannot see)
  bool estimated = false;
  std::string switch_knob;

  // Fractions of the window its workers spent in their own work, waiting for
  // input and blocked on output (each over window * parallelism).
  double busy_fraction = 0;
  double wait_input_fraction = 0;
  double wait_output_fraction = 0;
};

// Entropy (Huffman) decoding's share of a whole JPEG decode's CPU, measured
// on some of the pipeline's own files on the host (workflow/decode_probe.h).
// It depends on the files (their bits per pixel) and on the CPU (how fast it
// does the pixel work beside the bit-serial entropy decoding).
struct JpegEntropyShare {
  double share = 0;
  int files = 0;  // how many files it was measured on
};

struct Profile {
  std::string pipeline_name;
  double window_begin_seconds = 0;
  double window_end_seconds = 0;
  double window_seconds = 0;
  std::string window_reason;
  std::vector<StageProfile> stages;  // pipeline order; the last one feeds the consumer

  double outputs = 0;                  // pipeline outputs the consumer took in the window
  double measured_throughput = 0;      // outputs / window_seconds
  double consumer_stall_fraction = 0;  // consumer wait / window

  // CPU. `cores` is what the run could use; other_cpu_cores the process's CPU
  // outside every stage (consumer, tracer), treated as a constant load.
  double cores = 0;
  double other_cpu_cores = 0;
  double process_cpu_cores = -1;  // < 0: not measured
  // Oversubscription seen in the window: how much longer than their CPU time
  // CPU-bound threads took (1: none). Used to compute latency_seconds.
  double cpu_contention = 1;

  // Demand: the consumer's mean step time, as measured when its steps took
  // at least 1% of the window (a training loop's step, whether or not the
  // config states one), else the config's step_time_ms; unset: it drains.
  std::optional<double> step_time_seconds;

  // Storage: bandwidth when the config's resources give it, and the bytes
  // fetched from storage per pipeline output, charged to `storage_stage`
  // (the first read_file stage, else the source).
  std::optional<double> storage_bytes_per_second;
  double storage_bytes_per_output = 0;
  std::optional<size_t> storage_stage;

  // Caching. `source_elements_per_epoch`: nullopt when the epoch is endless
  // or its size unknown. `cache_stage`: index of a cache stage in the run.
  std::optional<double> source_elements_per_epoch;
  std::optional<size_t> cache_stage;
  bool cache_filled = false;
  std::optional<uint64_t> memory_budget_bytes;  // the config's resources.memory

  // Worker pools (a DataLoader's workers); stages name theirs by index.
  std::vector<WorkerGroup> groups;
  // CPU the consumer spends per output in its own step (a training step on
  // the CPU): it grows with throughput and competes with the stages for the
  // cores. Measured apart from other_cpu_cores, which stays a constant load.
  double consumer_cpu_seconds_per_output = 0;
  // The cores the consumer's step holds while it runs: its CPU per output,
  // every thread's, over its wall time (a step on the CPU whose operators
  // run on torch's intra-op pool: near every core). 0: not measured. A step
  // of threads of its own leaves the work off its thread only the whole
  // cores it does not hold (rate_model.h, the held step). Measured as the
  // run went: on a host whose other programs held the cores it holds less,
  // and a worker then takes its share from them (a step of 2 threads that
  // got 0.16 cores ran 1.6x faster beside a worker than alone).
  double consumer_step_cores = 0;
  // Outputs per epoch and epochs in the run, when known: worker start-up is
  // paid per epoch (once per run when persistent).
  std::optional<double> outputs_per_epoch;
  double epochs = 1;
  // Seconds each epoch waits before its first output where the loop makes
  // a new iterator per epoch (the config's consumer.epoch_start_ms), and
  // of them the iterators' making (consumer.epoch_iterator_ms), paid
  // whatever the knobs; absent, all of epoch_start_seconds is.
  double epoch_start_seconds = 0;
  std::optional<double> epoch_iterator_seconds;
  // Memory the run holds outside every buffer and worker (the consumer's
  // process), counted in plans' memory.
  double base_memory_bytes = 0;

  // For pricing a decode-and-crop fusion (decode_crop.h): measured where the
  // pipeline's files could be read; absent, kEntropyShare is assumed.
  std::optional<JpegEntropyShare> jpeg_entropy;
  // For pricing a fusion of adjacent maps (tuner/fusion.h): the CPU seconds
  // one element's hand-off between two stages costs (the upstream worker's
  // push, the downstream worker's pop and wake-up), measured on the host by
  // running the same work as two stages and as one (workflow/handoff_probe.h).
  // Each stage's measured CPU includes its share of it; a fused stage pays
  // it once less per boundary removed. Absent: no map fusion is priced.
  std::optional<double> handoff_cpu_seconds;
  // The user gave handoff_cpu_seconds (`tune --handoff-ns`) in place of the
  // probe's figure, so that a plan near the fusion's bar is reproducible;
  // the plan says which it used.
  bool handoff_given = false;

  // Every assumption the model made, one sentence each, for the report.
  std::vector<std::string> assumptions;

  // Index of the stage called `name`, or nullopt.
  std::optional<size_t> FindStage(const std::string& name) const;
};

// Builds the model's view of a window. `config` is the pipeline as it ran
// (the trace header's config); it gives the ratios the config implies (batch
// size, take, ...), random stages, the consumer's step time and the budgets.
// Without a config (a program traced with `pipetune profile`) every ratio is
// measured and the op names come from the trace.
//
// Local ratios: batch = its size; map, read_file, shuffle, prefetch, cache,
// repeat, take = 1; filter = measured consumed / produced (keep_every's `n`
// when too few elements were seen); unknown ops: measured. Visit ratios
// multiply the local ratios of the stages after a stage (the last stage: 1).
//
// Errors (kInvalidInput): no stages; a window of zero length; stage names
// that do not match the config's (a trace of another pipeline).
StatusOr<Profile> MakeProfile(const WindowMeasurement& window, const PipelineConfig* config);

// A process of `cores` that ran `cpu_cores_used` of them on average counts
// as CPU-saturated at 90% of them and more: its threads' time off the CPU
// was then spent waiting for a core. One threshold for every pipeline (a
// config's process and a DataLoader's loading processes alike).
bool CpuSaturated(double cpu_cores_used, double cores);

// A stage's time per element from what was measured: wall = CPU x
// `contention` (the wait for a core, 1 when there was none) + real off-CPU
// time, so latency_seconds is the CPU plus that off-CPU time (never 0), and
// latency_bound says the off-CPU part outweighs the CPU. Every profile
// builder sets its stages' latency here.
void SetStageLatency(StageProfile& stage, double cpu_seconds, double wall_seconds, double contention);

// The number of elements stage `index` produces per epoch, from the source's
// epoch size and the local ratios up to it; nullopt when the epoch size is
// unknown or endless, or a repeat or take lies before the stage.
std::optional<double> ElementsPerEpoch(const Profile& profile, size_t index);

}  // namespace pipetune::models

// The reference pipeline engine: executes a pipeline config (the chain of
// stages in docs/runtime.md) and its consumer, and says what happened.
//
// Threading model (docs/runtime.md has the whole story): every stage runs on
// its own thread(s) -- `parallelism` workers for map and read_file, one
// thread for every other op -- and hands its output to the next stage through
// a bounded queue, so a slow stage blocks its producers (backpressure) instead
// of growing memory. The consumer is the caller's thread.
//
// Two ways in:
//  - RunPipeline(): runs the pipeline and the config's consumer loop (sleep
//    `step_time_ms` per output, or drain) to the end of the data or for
//    `max_seconds`, and returns a summary. What `pipetune run` calls.
//  - Pipeline: a pull API for programs that embed the engine (and tests):
//    Next() hands out one output at a time.
//
// Every stage and worker thread reports to the tracer (pipetune/tracer)
// through its public API, so `pipetune run --trace` needs nothing more than
// tracer::Start() around RunPipeline().
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "pipetune/base/json.h"
#include "pipetune/base/status.h"
#include "pipetune/models/config.h"
#include "pipetune/runtime/element.h"
#include "pipetune/runtime/function_registry.h"

namespace pipetune::runtime {

// How a pipeline is built from its config.
struct BuildOptions {
  // Where `map` / `filter` functions are looked up; null: Builtins().
  const FunctionRegistry* registry = nullptr;
  // Parallel stages (map, read_file) hand out their outputs in input order
  // (sequence numbers and a reorder buffer). A stage can also ask for it with
  // the arg "deterministic": true. Off by default: with parallelism > 1
  // outputs may be reordered, which is faster when element costs vary.
  bool deterministic = false;
  // Relative `list_files` patterns and cache directories resolve against this
  // directory (the CLI passes the config file's directory); empty: the
  // current working directory.
  std::string base_dir;
  // Added to every seed the config states (list_files' shuffle_seed, a
  // shuffle's seed) and mixed into the seeds element functions get; 0 leaves
  // every result as the config alone gives it. pipetune.Loader's `seed`.
  uint64_t seed = 0;
  // This pipeline reads shard `shard_index` of `shard_count` of its source:
  // the elements at positions shard_index, shard_index + shard_count, ... of
  // each pass's order (after list_files' shuffle), so the shards of one epoch
  // are disjoint and together cover it, as DistributedSampler's are (without
  // its padding: shard sizes differ by at most one).
  uint32_t shard_index = 0;
  uint32_t shard_count = 1;
  // A batch stage copies its members' payloads into one buffer (the batch's
  // `data`, see Element::items): what a tensor wraps without a copy. Members
  // of different shapes or dtypes are then the batch's failure.
  bool collate_batches = false;
  // Live tuning (workflow/autotune.h): when > 0, every map and read_file
  // stage may be resized while it runs (Pipeline::SetParallelism) up to
  // max(this, its parallelism) workers. Such a stage's input queue is shared
  // from the start (markers pause it, as at parallelism > 1), so a pass ends
  // in order at any size. 0: sizes are fixed, as the config says.
  int resizable_workers = 0;
};

class Pipeline;

// What RunPipeline reports while it runs.
struct Progress {
  double seconds = 0;            // since the consumer started
  uint64_t outputs = 0;          // delivered to the consumer so far
  uint64_t source_elements = 0;  // examples inside those outputs
  double throughput = 0;         // outputs/s over the last interval
  double stall_fraction = 0;     // consumer wait / wall, since the start
  uint64_t buffer_bytes = 0;     // bytes held in buffers right now
  uint64_t cache_bytes = 0;      // bytes held by memory caches right now
};

struct RunOptions {
  // Stop after this many seconds; 0: run until a finite pipeline ends.
  double max_seconds = 0;
  // How often on_progress is called (consumer thread, between steps).
  double progress_interval_s = 0.5;
  std::function<void(const Progress&)> on_progress;
  // Called with every output the consumer takes, before its step.
  std::function<void(const Element&)> on_output;
  const FunctionRegistry* registry = nullptr;  // null: Builtins()
  bool deterministic = false;                  // see BuildOptions
  std::string base_dir;                        // see BuildOptions
  // When set, the run watches this flag (at least every 100 ms) and, once it
  // is true, stops as at the time limit: the summary covers what ran, with
  // `interrupted` set. The CLI sets it from its SIGINT/SIGTERM handler.
  const std::atomic<bool>* interrupt = nullptr;
  // See BuildOptions::resizable_workers.
  int resizable_workers = 0;
  // Called once the pipeline is built, before its threads start: a
  // controller that resizes it (Pipeline::SetParallelism, SetBuffer) from
  // on_progress keeps the reference, valid until RunPipeline returns.
  std::function<void(Pipeline&)> on_start;
};

struct StageSummary {
  std::string name;
  std::string op;
  int parallelism = 1;
  uint64_t elements = 0;           // produced (passed downstream)
  uint64_t consumed = 0;           // taken from the stage before
  uint64_t failed = 0;             // elements whose function failed (on_error skip)
  uint64_t bytes = 0;              // bytes of the elements produced
  double busy_seconds = 0;         // wall time in the stage's own work, all workers
  double wait_input_seconds = 0;   // workers blocked on an empty input
  double wait_output_seconds = 0;  // workers blocked on a full output buffer
  uint64_t peak_buffer_bytes = 0;  // its output buffer (and shuffle/batch/reorder state)
  uint64_t cache_bytes = 0;        // cache stages: bytes stored (memory or disk)
};

struct RunSummary {
  double seconds = 0;              // wall time of the consumer loop
  uint64_t outputs = 0;            // pipeline outputs delivered to the consumer
  uint64_t source_elements = 0;    // examples inside them (a batch of 64 counts 64)
  double throughput = 0;           // outputs / seconds
  double examples_per_second = 0;  // source_elements / seconds
  // The rate after the warm-up, the report's rule (analyzer/window.h): from
  // the first 10% of the run, and at least its first second or quarter,
  // whichever is shorter, to the last output. The whole run's rate when too
  // few outputs came after the warm-up.
  double steady_examples_per_second = 0;
  double steady_from_seconds = 0;  // where that window starts
  double stall_fraction = 0;       // consumer time waiting for an output / seconds
  uint64_t peak_buffer_bytes = 0;  // peak bytes held by all buffers together
  uint64_t cache_bytes = 0;        // bytes held by memory caches at the end
  uint64_t disk_cache_bytes = 0;   // bytes written to or replayed from disk caches
  bool stopped_early = false;      // max_seconds reached (or interrupted) before the end of the data
  bool interrupted = false;        // RunOptions::interrupt stopped the run
  std::vector<StageSummary> stages;
  uint64_t failed_elements = 0;  // sum over stages (on_error skip)
  // The first few failure messages, each naming the stage and the element.
  std::vector<std::string> errors;
};

// JSON for `pipetune run --summary`: throughput, examples_per_second,
// steady_examples_per_second, steady_from_seconds, elements (= outputs), seconds, stall_fraction,
// failed_elements, peak_buffer_bytes, cache_bytes, disk_cache_bytes, stopped_early, errors, and stages[]
// {name, op, elements, consumed, parallelism, failed, bytes, busy_seconds, wait_input_seconds,
// wait_output_seconds, peak_buffer_bytes, cache_bytes}.
Json SummaryToJson(const RunSummary& summary);

// Builds the pipeline (bad fn or args: kInvalidInput naming stage and key),
// runs it with the config's consumer and returns the summary. An element
// function failing on a stage with on_error "stop" ends the run promptly with
// kFailed naming the stage, the element (id and path) and the function's
// message; with on_error "skip" the element is counted in `failed` and the
// run goes on.
StatusOr<RunSummary> RunPipeline(const models::PipelineConfig& config, const RunOptions& options = {});

class PipelineImpl;

// The pull API. Not thread-safe: one consumer thread calls Next().
class Pipeline {
 public:
  // Builds every stage; threads start on the first Next() (or Start()).
  static StatusOr<std::unique_ptr<Pipeline>> Create(const models::PipelineConfig& config,
                                                    const BuildOptions& options = {});
  static StatusOr<std::unique_ptr<Pipeline>> Create(const models::PipelineConfig& config,
                                                    const FunctionRegistry* registry);
  // Stops and joins every thread.
  ~Pipeline();
  Pipeline(const Pipeline&) = delete;
  Pipeline& operator=(const Pipeline&) = delete;

  // Starts the stage threads and asks for the one pass (epoch 0) that Next()
  // then hands out; idempotent.
  void Start();
  // Epoch by epoch instead (pipetune.Loader): starts the threads if needed and
  // asks for one pass whose elements are numbered `epoch` (seeds and shuffles
  // follow it). Next() returns false at the end of that pass and the pipeline
  // stays up, its caches filled, for the next StartEpoch. Call it only
  // before the first Next() or after Next() returned false; a pass left
  // half-read is ended with Stop().
  void StartEpoch(uint32_t epoch);
  // Blocks for the next output. True: *out holds it. False: the end of the
  // data (or Stop()). An error: a stage with on_error "stop" failed (kFailed,
  // naming stage, element and message); the pipeline has stopped.
  StatusOr<bool> Next(Element* out);
  // Next() that gives up after `timeout_ms` (a caller that must react to
  // signals between waits): kEmpty-like `false` with *timed_out set.
  StatusOr<bool> NextFor(Element* out, int64_t timeout_ms, bool* timed_out);
  // Stops every stage promptly and joins their threads; later Next() calls
  // return false. Safe to call from another thread while Next() blocks.
  void Stop();

  // Live tuning, from any thread while the consumer runs (after Stop(): no
  // effect). SetParallelism: a map or read_file stage built resizable
  // (BuildOptions::resizable_workers) runs `parallelism` workers from now
  // on; workers beyond it finish what they hold and exit (their threads end;
  // growing starts new ones), so no element is lost or repeated and an
  // ordered stage keeps its order. A resize before the first Next() starts
  // the stage threads. SetBuffer: a
  // prefetch stage keeps up to `buffer` elements from now on (a smaller
  // buffer drains to it). kInvalidInput naming the stage and key: no such
  // stage, the wrong op, not resizable, or out of range.
  Status SetParallelism(const std::string& stage, int parallelism);
  Status SetBuffer(const std::string& stage, int64_t buffer);

  // Counters so far (complete once Next() returned false or after Stop()).
  // `seconds`, `outputs`, throughput and stall are left for the caller.
  std::vector<StageSummary> StageSummaries() const;
  uint64_t PeakBufferBytes() const;
  uint64_t BufferBytes() const;
  uint64_t CacheBytes() const;
  uint64_t DiskCacheBytes() const;
  uint64_t FailedElements() const;
  std::vector<std::string> Errors() const;
  // Elements the source produces per pass (this build's shard); nullopt for
  // an endless source.
  std::optional<uint64_t> SourceElementsPerPass() const;

 private:
  explicit Pipeline(std::unique_ptr<PipelineImpl> impl);
  std::unique_ptr<PipelineImpl> impl_;
};

}  // namespace pipetune::runtime

// The parts every stage is made of: the state its pipeline shares, the
// control messages that flow upstream (RequestPass, Cancel), and the
// per-thread StageWorker that pops input, times work, batches output and
// reports all of it to the tracer.
//
// Passes. Data moves downstream, requests move upstream. The consumer asks
// the last stage for one pass (RequestPass); stages forward the request until
// a stage that answers it: a source produces its elements, a complete cache
// replays them, a repeat asks its upstream for `count` passes in turn. Every
// request is answered by exactly one end-of-pass marker, after every element
// of that pass; ordinary stages pass the marker on in order (a parallel stage
// waits for its in-flight elements first). Cancel() (from `take`) ends the
// passes requested so far early; their markers still come.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "pipetune/base/status.h"
#include "pipetune/models/config.h"
#include "pipetune/runtime/function_registry.h"
#include "pipetune/runtime/pipeline.h"
#include "pipetune/tracer/tracer.h"
#include "queue.h"

namespace pipetune::runtime {

// What every stage of one pipeline shares.
class RunState {
 public:
  explicit RunState(BuildOptions options) : options_(std::move(options)) {}

  const BuildOptions& options() const { return options_; }
  bool stopping() const { return stopping_.load(std::memory_order_relaxed); }

  // Set by the pipeline: closes every queue and wakes every waiting stage.
  void SetStopHandler(std::function<void()> handler) { stop_handler_ = std::move(handler); }
  // Idempotent; callable from any thread, including stage workers.
  void StopAll();

  // An element function failed. With on_error "stop" the first such failure
  // becomes the pipeline's error and everything stops; with "skip" it is
  // counted and its message kept (the first few).
  void RecordFailure(const models::StageConfig& stage, const Element& element, const Status& status);
  // A failure that is not one element's (a disk cache that cannot be written).
  void Fail(const Status& status);
  // A problem worth reporting that does not stop the run.
  void Note(const std::string& message);
  Status error() const;
  std::vector<std::string> errors() const;

  MemoryAccount& buffers() { return buffers_; }
  MemoryAccount& cache() { return cache_; }
  std::atomic<uint64_t>& disk_cache_bytes() { return disk_cache_bytes_; }

 private:
  const BuildOptions options_;
  std::atomic<bool> stopping_{false};
  std::function<void()> stop_handler_;
  std::once_flag stop_once_;
  mutable std::mutex mu_;
  Status error_;
  std::vector<std::string> messages_;
  MemoryAccount buffers_;
  MemoryAccount cache_;
  std::atomic<uint64_t> disk_cache_bytes_{0};
};

// Counters of one worker thread: the tracer's WorkerCounters, which the
// worker's recorder adds to (so each event is counted once, for the trace and
// for the run's summary alike), and the failures, which only the summary
// reports. One writer (the worker); readers (progress, summaries) may read
// them at any time, also after the worker's thread is gone.
struct WorkerCounters {
  tracer::WorkerCounters counts;
  alignas(64) std::atomic<uint64_t> failed{0};
};

// Pending pass requests of a stage that answers them itself (source, cache,
// repeat), and which of them were cancelled.
class RequestChannel {
 public:
  struct Request {
    uint32_t epoch = 0;
    uint64_t index = 0;  // how many requests came before this one
  };
  void Post(uint32_t epoch);
  // Cancels every request posted so far (running or pending).
  void Cancel();
  // Blocks for the next request; false when the pipeline stops.
  bool Wait(const RunState& run, Request* request);
  bool Cancelled(const Request& request) const {
    return request.index < cancelled_upto_.load(std::memory_order_relaxed);
  }
  void Shutdown();

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Request> pending_;
  uint64_t posted_ = 0;
  std::atomic<uint64_t> cancelled_upto_{0};
  bool shutdown_ = false;
};

class Stage {
 public:
  Stage(const models::StageConfig& config, RunState* run);
  virtual ~Stage() = default;
  Stage(const Stage&) = delete;
  Stage& operator=(const Stage&) = delete;

  const models::StageConfig& config() const { return config_; }
  tracer::StageId trace_id() const { return trace_id_; }
  RunState& run() { return *run_; }

  // Worker threads this stage runs; RunWorker(i) is the body of thread i.
  virtual int workers() const { return 1; }
  // The most worker threads it may ever run: workers() except for a
  // parallel stage built resizable (BuildOptions::resizable_workers), which
  // has counters for this many and a shared input queue from the start.
  virtual int max_workers() const { return workers(); }
  // The worker threads to start so that `workers` run, which the pipeline
  // then starts (RunWorker(i) for each index returned). The first call, at
  // start, returns 0..workers()-1 for every stage. Later calls resize a
  // resizable stage (1..max_workers()): workers above the new count exit
  // once they have passed on what they hold, and indices below it that are
  // not running are returned. Other stages return nothing after the first.
  virtual std::vector<int> Resize(int workers);
  virtual void RunWorker(int index) = 0;
  // Limits of this stage's output buffer (prefetch: its `buffer` knob).
  virtual Queue::Limits OutputLimits() const { return {}; }

  // Control, from the downstream stage's thread (or the consumer's).
  virtual void RequestPass(uint32_t epoch) { upstream_->RequestPass(epoch); }
  virtual void Cancel() {
    if (upstream_ != nullptr) upstream_->Cancel();
  }
  // Wakes whatever the stage waits on besides its queues; after StopAll.
  virtual void Shutdown() {}
  // Bytes a cache stage holds (memory) or wrote/replayed (disk).
  virtual uint64_t CacheBytes() const { return 0; }
  // A source: the elements each pass produces (its shard); nullopt: endless
  // or not a source.
  virtual std::optional<uint64_t> ElementsPerPass() const { return std::nullopt; }

  // Wiring, done by the pipeline before any thread starts.
  void Connect(Stage* upstream, Queue* input) {
    upstream_ = upstream;
    input_ = input;
  }
  void SetOutput(std::unique_ptr<Queue> output) { output_ = std::move(output); }
  Queue* input() { return input_; }
  Queue* output() { return output_.get(); }

  WorkerCounters& counters(int index) { return *counters_[index]; }
  void AllocateCounters();
  StageSummary Summary() const;
  // Bytes held by the stage's own state (shuffle buffer, partial batch,
  // reorder buffer), accounted with the buffers.
  void AccountState(int64_t delta);

 protected:
  const models::StageConfig config_;
  RunState* const run_;
  const tracer::StageId trace_id_;
  Stage* upstream_ = nullptr;
  Queue* input_ = nullptr;
  std::unique_ptr<Queue> output_;
  std::vector<std::unique_ptr<WorkerCounters>> counters_;
  std::atomic<uint64_t> state_bytes_{0};
  std::atomic<uint64_t> peak_state_bytes_{0};
  bool threads_started_ = false;  // Resize's first call (the pipeline's thread, under its lock)
};

// splitmix64's finalizer: a well-mixed, cheap hash that is the same on every
// platform (what seeded shuffles and FnContext seeds are made of).
inline uint64_t Mix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// A seed deterministic in (stage, element, epoch) and the build's seed
// (BuildOptions::seed; 0 keeps the seeds every earlier run got): what
// FnContext carries.
inline uint64_t ElementSeed(size_t stage_index, uint64_t element_id, uint32_t epoch, uint64_t run_seed) {
  uint64_t seed = Mix64(Mix64(Mix64(stage_index) ^ element_id) ^ epoch);
  return run_seed == 0 ? seed : Mix64(seed ^ run_seed);
}

// Runs an element function; an exception it throws (a user's function may)
// becomes that element's failure instead of ending the process.
Status ApplyGuarded(const MapFunction& fn, Element& element, const FnContext& context);
StatusOr<bool> KeepGuarded(const FilterFunction& fn, const Element& element, const FnContext& context);

// One worker thread's view of its stage: attached to the tracer for the
// thread's lifetime, it pops input in chunks, keeps one clock reading that
// every event chains from (`now_ns`), and batches output into chunks that it
// flushes when they are big or old enough, or before it blocks.
class StageWorker {
 public:
  StageWorker(Stage& stage, int index);
  ~StageWorker();
  StageWorker(const StageWorker&) = delete;
  StageWorker& operator=(const StageWorker&) = delete;

  enum class Input { kElement, kEndOfPass, kClosed };
  // The next input item. Before it blocks on an empty input it flushes the
  // output (and, on a multi-consumer input, reports finished elements).
  Input Next(Item* item);
  uint64_t seq() const { return seq_; }  // input sequence number of the last item
  // Items popped and not yet handed out by Next(): a worker about to leave a resized stage
  // runs these first, so nothing it took is stranded.
  bool HoldsInput() const { return in_pos_ < in_.size(); }

  // The stage's own work on one element ran from `begin_ns` to now: reads the
  // clock once, which becomes now_ns.
  void WorkDone(uint64_t begin_ns, uint64_t element_id);
  // Counts a failed element (on_error skip).
  void CountFailed() { tracer::WorkerCounters::Add(counters_.failed, 1); }

  // Queues `element` for the output. False: the pipeline is stopping.
  bool Emit(Element&& element);
  bool EmitEndOfPass();
  // Pushes the pending output chunk (blocking while the output is full).
  bool Flush();
  // Pushes `chunk` directly (the deterministic reorder path).
  bool PushChunk(std::vector<Item>& chunk);
  // On a multi-consumer input: elements handed out are reported finished at
  // each flush. The reorder path reports them itself.
  void set_report_done(bool report) { report_done_ = report; }
  // At most this many items per input pop and per output chunk (prefetch
  // keeps it within its buffer; the reorder path pops one at a time).
  void set_max_chunk(size_t items);
  // A single-worker stage that can do nothing until `items` more inputs are
  // there (a batch) sleeps until then (Queue::Pop's wake_at).
  void set_wake_at(size_t items) { wake_at_ = items; }

  uint64_t now_ns = 0;

 private:
  bool ShouldFlush() const;
  size_t PopSize() const;

  Stage& stage_;
  WorkerCounters& counters_;
  tracer::Worker* trace_;
  const bool parallel_;
  bool report_done_ = true;
  size_t max_chunk_ = kChunkItems;
  size_t wake_at_ = 1;

  std::vector<Item> in_;
  size_t in_pos_ = 0;
  uint64_t in_first_seq_ = 0;
  uint64_t seq_ = 0;
  size_t pending_done_ = 0;

  std::vector<Item> out_;
  uint64_t out_bytes_ = 0;
  uint64_t out_first_ns_ = 0;
  uint64_t last_cost_ns_ = 0;
};

// A stage whose single worker serves whole passes on request: a source
// emits one pass of its elements, a repeat forwards several of its upstream.
// The loop (wait for a request, serve it, mark its end) is written once here;
// each kind says only how it serves a pass.
class PassServingStage : public Stage {
 public:
  using Stage::Stage;

  void RequestPass(uint32_t epoch) override { channel_.Post(epoch); }
  void Shutdown() override { channel_.Shutdown(); }
  void RunWorker(int index) override;

 protected:
  // Emits one pass's elements; false when the pipeline stops.
  virtual bool ServePass(StageWorker& worker, const RequestChannel::Request& request) = 0;

  RequestChannel channel_;
};

}  // namespace pipetune::runtime

// The recording API: what a pipeline (the pipetune runtime, or any program
// that links pipetune::tracer) calls to describe its stages and report work.
//
// Cost model. Everything a worker calls per element (Worker::Produced,
// Consumed, Work, WorkCpu, WaitInput, WaitOutput, and ConsumerStep) is lock-free,
// allocation-free and makes no system call: it adds to counters the calling
// thread owns (a relaxed load and store each). The counters count whether or
// not a session records, because they are also the caller's own counts: the
// runtime's run summary reads the same WorkerCounters the sampler reads, so
// each event is counted once. A session reports the counts since it started.
// Only the span ring and ConsumerStep's records check whether tracing is on
// (one relaxed load and a branch). The
// caller reads the clock (NowNs) and chains timestamps, so that one clock read
// per event suffices. A single sampler thread, started by Start(), reads the
// counters and each worker's CPU clock every snapshot interval and appends a
// chunk to the trace file.
//
// Threading. Registration, attach/detach and Start/Stop take a mutex and may
// be called from any thread. A Worker belongs to the thread that attached it:
// only that thread may call its methods, and it must DetachWorker before it
// exits. ConsumerStep may be called from any thread; each calling thread gets
// its own counters.
#pragma once

#include <time.h>

#include <atomic>
#include <cstdint>
#include <string>

#include "pipetune/base/status.h"
#include "pipetune/tracer/records.h"

namespace pipetune::tracer {

// CLOCK_MONOTONIC in nanoseconds: a vDSO call, no system call. Every time the
// API takes is on this clock.
inline uint64_t NowNs() noexcept {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000u + static_cast<uint64_t>(ts.tv_nsec);
}

struct SessionOptions {
  std::string path;  // the trace file; created or truncated
  std::string pipeline_name;
  std::string config_json;  // the pipeline config as run, stored verbatim
  // The file the config was read from, when there is one (made absolute by
  // Start). Relative paths inside the config are relative to its directory,
  // which `pipetune tune` needs to write a tuned config elsewhere.
  std::string config_path;
  uint32_t snapshot_interval_ms = 100;
  // Budgets for individually recorded events. Beyond them events are still
  // counted (sampling), only not recorded one by one. 0 records none.
  uint32_t spans_per_stage_per_second = 200;
  uint32_t consumer_steps_per_second = 1000;
};

// Opens options.path, writes the header (host facts, config, the stages
// registered so far) and starts the sampler thread. Fails when a session is
// already running, except one started from PIPETUNE_TRACE, which an explicit
// Start() closes and replaces. Counters count from here on.
Status Start(const SessionOptions& options);

// Stops the sampler, writes a final snapshot and an end record, closes the
// file. Returns the first write error of the session, if any. Safe to call
// when no session runs (returns Ok). In a child process forked from a traced
// one it only turns recording off: the file belongs to the parent.
Status Stop();

// Starts a session when the environment variable PIPETUNE_TRACE names a path,
// with `defaults` for everything else (PIPETUNE_TRACE_INTERVAL_MS overrides
// the snapshot interval). A no-op when PIPETUNE_TRACE is unset or empty. When
// a session is already running, it only records defaults' pipeline name and
// config (SetPipelineInfo) if given. Stop() is registered with atexit.
//
// Any program linking the tracer also calls this once before main() (a
// static initializer), so `pipetune profile -- PROGRAM` traces programs that
// never call it. Programs that know their pipeline (the pipetune runtime, C
// API users) call it again once they do, to put name and config in the trace.
Status StartFromEnvironment(const SessionOptions& defaults = {});

// Records the pipeline's name and config in the running trace (readers take
// the latest), for programs that learn them after the session started (the
// header holds SessionOptions' values). Without a session it does nothing.
// `config_path`, when given, is the file the config was read from (made
// absolute here).
void SetPipelineInfo(const std::string& pipeline_name, const std::string& config_json,
                     const std::string& config_path = "");

// What this process may use on this host (affinity, cgroup v1/v2 CPU quota
// and memory limit, MemAvailable): the facts a trace's header records. Reads
// /proc and /sys; a fact that cannot be read is left at its "unknown" value.
HostFacts CollectHostFacts();

namespace internal {
extern std::atomic<bool> g_enabled;

// Per-stage sampling budget, shared by the stage's workers. A Generic Cell
// Rate Algorithm: next_ns is the earliest time the next event conforms (less
// burst_ns of tolerance), and each accepted event pushes it one interval on.
// The gate is judged on an event's *begin* time so that, unlike picking "the
// element in flight at time t", long elements are not favoured.
// interval_ns and burst_ns are set by Start() and only read here; they are
// atomic because a worker may still be inside Work() when a session starts.
struct alignas(64) RateGate {
  std::atomic<uint64_t> next_ns{~uint64_t{0}};  // max: closed (budget 0)
  std::atomic<uint64_t> interval_ns{0};
  std::atomic<uint64_t> burst_ns{0};

  bool TryAcquire(uint64_t t) noexcept {
    uint64_t next = next_ns.load(std::memory_order_relaxed);
    // A closed gate's next is max, so this also rejects when the budget is 0.
    if (t + burst_ns.load(std::memory_order_relaxed) < next) return false;
    uint64_t after = (next > t ? next : t) + interval_ns.load(std::memory_order_relaxed);
    // Losing the race to another worker means "not this one", never a retry.
    return next_ns.compare_exchange_strong(next, after, std::memory_order_relaxed);
  }
};

struct StageState;
struct WorkerAccess;
void RecordConsumerStep(uint64_t wait_ns, uint64_t step_ns, uint64_t end_ns) noexcept;
}  // namespace internal

// True while a session records. A relaxed load: instrumented code may test it
// to skip preparing arguments.
inline bool Enabled() noexcept { return internal::g_enabled.load(std::memory_order_relaxed); }

struct StageInfo {
  std::string name;
  std::string op;
  uint32_t parallelism = 1;
};

// Registers a stage and returns its id. Works with or without a session:
// stages registered before Start() are written when it starts. Returns
// kInvalidStage after 16384 stages; every function accepts kInvalidStage and
// does nothing with it.
StageId RegisterStage(const StageInfo& info);

// The stage is finished: its last counters go into the next snapshot, and
// later snapshots leave it out. Detach its workers first.
void RetireStage(StageId stage);

void SetParallelism(StageId stage, uint32_t parallelism);

// The stage's output buffer now holds this many elements and bytes (a gauge,
// read at each snapshot). Two relaxed stores; kept even when tracing is off
// so that a session started later sees the current value.
void SetBufferOccupancy(StageId stage, int64_t elements, int64_t bytes);

// Elements one pass of the stage holds (a source's listing, or its first
// finished pass), read at each snapshot: what tells the tuner an epoch's
// size, and so what a cache would hold, when a repeat keeps the source from
// ever running dry. One relaxed store.
void SetEpochElements(StageId stage, uint64_t elements);

// One worker thread's StageCounts as it counts them. One writer (the worker
// thread, through its Worker); any thread may Load() them at any time. The
// counters have one writer, so a relaxed load and store (two plain moves on
// x86) suffice; they are atomic only so that readers may read them
// concurrently. A program that wants the counts after the thread is gone (the
// runtime's run summary) owns them and passes them to AttachWorker.
struct alignas(64) WorkerCounters {
  std::atomic<uint64_t> produced{0};
  std::atomic<uint64_t> consumed{0};
  std::atomic<uint64_t> bytes_produced{0};
  std::atomic<uint64_t> work_ns{0};
  std::atomic<uint64_t> wait_input_ns{0};
  std::atomic<uint64_t> wait_output_ns{0};

  StageCounts Load() const noexcept {
    return StageCounts{
        produced.load(std::memory_order_relaxed),       consumed.load(std::memory_order_relaxed),
        bytes_produced.load(std::memory_order_relaxed), work_ns.load(std::memory_order_relaxed),
        wait_input_ns.load(std::memory_order_relaxed),  wait_output_ns.load(std::memory_order_relaxed)};
  }
  static void Add(std::atomic<uint64_t>& counter, uint64_t delta) noexcept {
    counter.store(counter.load(std::memory_order_relaxed) + delta, std::memory_order_relaxed);
  }
};

// The recorder of one worker thread of one stage. Obtain it on the worker
// thread with AttachWorker(); all methods must be called on that thread.
class Worker {
 public:
  Worker(const Worker&) = delete;
  Worker& operator=(const Worker&) = delete;

  // The stage emitted `elements` elements totalling `bytes`.
  void Produced(uint64_t elements, uint64_t bytes) noexcept {
    WorkerCounters::Add(counters_->produced, elements);
    WorkerCounters::Add(counters_->bytes_produced, bytes);
  }
  // The stage took `elements` elements from its input.
  void Consumed(uint64_t elements) noexcept { WorkerCounters::Add(counters_->consumed, elements); }
  // The stage's own work on one element ran from begin_ns to end_ns. Adds
  // the wall time, and while a session records, records the element as a
  // span when the stage's per-second span budget allows.
  void Work(uint64_t begin_ns, uint64_t end_ns, uint64_t element_id) noexcept {
    WorkerCounters::Add(counters_->work_ns, end_ns > begin_ns ? end_ns - begin_ns : 0);
    if (Enabled() && gate_->TryAcquire(begin_ns)) PushSpan(begin_ns, end_ns, element_id);
  }
  // The CPU time the calling thread spent on one element's work, measured by
  // the caller (e.g. the thread's CPU clock around the call). Once a worker
  // reports it, its stage's cpu_ns counts what it reported instead of the
  // thread's whole CPU time: for threads that run several stages in turn
  // (a Python process's main thread), where the thread's time would be
  // charged to each of them. Report from the worker's first element on: the
  // stage's CPU switches to the reported sum at the first call.
  void WorkCpu(uint64_t cpu_ns) noexcept {
    WorkerCounters::Add(reported_cpu_ns_, cpu_ns);
    reports_cpu_.store(true, std::memory_order_relaxed);
  }
  // Time blocked waiting for an input element.
  void WaitInput(uint64_t ns) noexcept { WorkerCounters::Add(counters_->wait_input_ns, ns); }
  // Time blocked because the output buffer was full.
  void WaitOutput(uint64_t ns) noexcept { WorkerCounters::Add(counters_->wait_output_ns, ns); }

  // What this worker has counted since it attached, or, with counters passed
  // to AttachWorker, everything those counters hold.
  const WorkerCounters& counters() const noexcept { return *counters_; }
  StageId stage() const noexcept { return stage_; }
  uint32_t index() const noexcept { return index_; }  // WorkerDef::worker

 private:
  friend struct internal::WorkerAccess;
  Worker(StageId stage, uint32_t index, internal::RateGate* gate, internal::StageState* state,
         WorkerCounters* counters)
      : counters_(counters != nullptr ? counters : &own_counters_),
        gate_(gate),
        state_(state),
        stage_(stage),
        index_(index) {}

  // Single-producer (this thread), single-consumer (the sampler) ring.
  void PushSpan(uint64_t begin_ns, uint64_t end_ns, uint64_t element_id) noexcept {
    uint64_t head = span_head_.load(std::memory_order_relaxed);
    if (head - span_tail_.load(std::memory_order_acquire) >= kSpanRing) {
      WorkerCounters::Add(spans_dropped_, 1);
      return;
    }
    spans_[head % kSpanRing] = SpanSlot{begin_ns, end_ns, element_id};
    span_head_.store(head + 1, std::memory_order_release);
  }

  static constexpr uint32_t kSpanRing = 512;
  struct SpanSlot {
    uint64_t begin_ns, end_ns, element_id;
  };

  // Written by the owning thread; read by the sampler.
  WorkerCounters* const counters_;  // the caller's, or own_counters_
  WorkerCounters own_counters_;
  std::atomic<uint64_t> spans_dropped_{0};
  std::atomic<uint64_t> reported_cpu_ns_{0};  // WorkCpu's sum, since the attach
  std::atomic<bool> reports_cpu_{false};      // WorkCpu was called: cpu_ns is reported_cpu_ns_
  std::atomic<uint64_t> span_head_{0};
  internal::RateGate* const gate_;
  internal::StageState* const state_;
  const StageId stage_;
  const uint32_t index_;
  // Written by the sampler only; on its own cache line so that draining does
  // not bounce the line the worker writes its counters to.
  alignas(64) std::atomic<uint64_t> span_tail_{0};
  alignas(64) SpanSlot spans_[kSpanRing];
};

// Creates the calling thread's recorder for `stage` (it notes the thread's
// CPU clock for the sampler). Never returns null; for kInvalidStage the
// recorder counts only into its counters. Works with or without a session.
// With `counters`, the worker counts into them (they must outlive it; what
// they held before the attach is not the stage's); without, into its own.
Worker* AttachWorker(StageId stage, WorkerCounters* counters = nullptr);

// Call on the worker's thread before it exits: folds the thread's final CPU
// time and counters into the stage, so the sampler never reads the clock of a
// dead thread. Frees `worker`; null is ignored.
void DetachWorker(Worker* worker);

// AttachWorker for the scope of an object, DetachWorker on its destruction.
class ScopedWorker {
 public:
  explicit ScopedWorker(StageId stage) : worker_(AttachWorker(stage)) {}
  ~ScopedWorker() { DetachWorker(worker_); }
  ScopedWorker(const ScopedWorker&) = delete;
  ScopedWorker& operator=(const ScopedWorker&) = delete;
  Worker* operator->() const noexcept { return worker_; }
  Worker& operator*() const noexcept { return *worker_; }

 private:
  Worker* worker_;
};

// One training step of the consumer: it waited wait_ns for its input, then
// its step ran step_ns, ending at end_ns. Always counted; recorded one by one
// up to the session's consumer_steps_per_second.
inline void ConsumerStep(uint64_t wait_ns, uint64_t step_ns, uint64_t end_ns) noexcept {
  if (!Enabled()) return;
  internal::RecordConsumerStep(wait_ns, step_ns, end_ns);
}

// GPU activity from an activity source (the CUPTI tracer): copied into a
// bounded buffer (at most 65536 records between snapshots, names cut to 512
// bytes); beyond it records are dropped and counted. Takes a mutex: for
// batches of records from a source's buffer callback, not per element.
void RecordGpuActivity(const GpuActivity& activity);
// Records the source itself lost (CUPTI's dropped-record count).
void RecordGpuDrops(uint64_t records);
// The GPU activity source's state: whether it records, and if not why. Kept
// (the latest one) and written with the next snapshot of this session and
// at the start of any later one.
void RecordGpuStatus(const GpuStatus& status);
// A function the sampler calls before each snapshot and before the final
// one at Stop(), without tracer locks held: a GPU activity source flushes its
// buffers there (calling RecordGpuActivity). nullptr removes it. The hook
// must not call Start() or Stop().
void SetSnapshotHook(void (*hook)());

}  // namespace pipetune::tracer

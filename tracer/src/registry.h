// The process-wide registry of stages, workers and consumer threads, and the
// sampler's view of it: what one snapshot ("tick") collects. The session
// (session.cc) owns the file and the sampler thread; this file owns the
// counters' bookkeeping. One mutex guards everything here except the fields
// the hot path touches, which are atomics owned by their writing thread.
#pragma once

#include <time.h>

#include <atomic>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "pipetune/tracer/reader.h"
#include "pipetune/tracer/tracer.h"

namespace pipetune::tracer::internal {

inline constexpr uint32_t kMaxStages = 16384;
inline constexpr size_t kMaxGpuPending = 65536;  // GPU records between two ticks
inline constexpr size_t kMaxGpuNameBytes = 512;
inline constexpr size_t kMaxOrphanRecords = 65536;  // of detached threads, between ticks
// Budget sampling tolerates bursts of this much time's worth of events, so a
// stage running exactly at its budget is not thinned by jitter.
inline constexpr uint64_t kBurstNs = 100'000'000;

// A stage's cumulative counters: what its workers counted, and what the
// sampler adds (CPU time, spans lost).
struct Totals : StageCounts {
  uint64_t cpu_ns = 0, spans_dropped = 0;
  Totals& operator+=(const Totals& o);
};

struct WorkerEntry {
  Worker* worker = nullptr;
  StageCounts at_attach;  // what the worker's counters held when it attached
  clockid_t cpu_clock = 0;
  uint64_t cpu_at_attach_ns = 0;  // the thread's CPU time before it attached
  uint64_t last_cpu_ns = 0;       // last successful read, should a read fail
  WorkerDef def;
};

struct StageState {
  StageState(StageId stage_id, const StageInfo& info)
      : id(stage_id), name(info.name), op(info.op), parallelism(info.parallelism) {}

  const StageId id;
  const std::string name;
  const std::string op;
  std::atomic<uint32_t> parallelism;
  std::atomic<int64_t> occupancy_elements{0};
  std::atomic<int64_t> occupancy_bytes{0};
  std::atomic<uint64_t> epoch_elements{0};
  std::atomic<bool> retired{false};
  RateGate gate;

  // Guarded by Registry::mu.
  std::vector<WorkerEntry> workers;
  Totals detached;              // folded in by DetachWorker
  Totals baseline;              // the totals when the session started
  uint64_t spans_recorded = 0;  // drained in this session
  bool announced = false;       // its StageDef is in the current trace
  bool finished = false;        // retired, and its last snapshot written
};

// Everything the sampler collects in one tick. Reused from tick to tick so
// that a steady run allocates nothing once the vectors have grown.
struct Tick {
  uint64_t time_ns = 0;
  std::vector<PipelineInfo> pipeline_infos;
  std::vector<StageDef> new_stages;
  std::vector<WorkerDef> new_workers;
  std::vector<StageSnapshot> snapshots;
  ConsumerTotals consumer;
  ProcessSample process;
  DropCounts drops;
  std::vector<SpanRecord> spans;
  std::vector<ConsumerStepRecord> steps;
  std::vector<GpuActivity> gpu;
  bool has_gpu_status = false;
  GpuStatus gpu_status;

  void Clear();
};

// Starts counting for a session: takes every counter's current value as the
// baseline, opens the sampling gates with the session's budgets, forgets
// records left from an earlier session. Call before turning g_enabled on.
void BeginSession(const SessionOptions& options);
// Collects one tick; snapshots are relative to the session's baselines.
void CollectTick(Tick* tick);
// Forgets the session's pending records. Call after the last CollectTick.
void EndSession();
void QueuePipelineInfo(const PipelineInfo& info);

// Fork safety: the registry's mutex is held across fork() so that a child
// never inherits it locked. Installed once, by the first registry use.
void InstallForkHandlers();

}  // namespace pipetune::tracer::internal

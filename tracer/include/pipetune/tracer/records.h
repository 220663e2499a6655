// The records a trace holds, as plain structs shared by the recording side
// (tracer.h) and the reading side (reader.h). Every time is nanoseconds on the
// host's CLOCK_MONOTONIC (the clock NowNs() reads), every counter is
// cumulative since the session started, unless a field says otherwise.
// docs/trace-format.md describes how each struct is laid out in the file.
#pragma once

#include <cstdint>
#include <string>

namespace pipetune::tracer {

// Index of a registered stage; stable for the life of the process.
using StageId = uint32_t;
inline constexpr StageId kInvalidStage = 0xffffffffu;

// How a trace's timestamps relate to the world.
struct ClockInfo {
  std::string name = "CLOCK_MONOTONIC";
  uint32_t clock_id = 1;       // the POSIX clockid_t value
  uint64_t resolution_ns = 0;  // clock_getres
  uint64_t start_ns = 0;       // the clock when the session started
  int64_t start_unix_ns = 0;   // CLOCK_REALTIME at the same moment
};

// What the process may use on the host it ran on, read when the session
// started. -1 means "no such limit" (or "could not be read").
struct HostFacts {
  std::string hostname;
  uint32_t cores_online = 0;    // sysconf(_SC_NPROCESSORS_ONLN)
  uint32_t cores_allowed = 0;   // sched_getaffinity
  uint32_t cgroup_version = 0;  // 0: none found, 1 or 2
  int64_t cpu_quota_us = -1;    // cgroup CPU quota per period (cpu.max)
  int64_t cpu_period_us = -1;
  int64_t memory_limit_bytes = -1;      // cgroup memory limit (memory.max)
  int64_t memory_available_bytes = -1;  // MemAvailable
  int64_t memory_total_bytes = -1;      // MemTotal

  // The CPU quota in cores (quota / period), or 0 when there is none.
  double CpuQuotaCores() const {
    if (cpu_quota_us <= 0 || cpu_period_us <= 0) return 0.0;
    return static_cast<double>(cpu_quota_us) / static_cast<double>(cpu_period_us);
  }
  // Cores the process can keep busy: the affinity mask, capped by the quota.
  double UsableCores() const {
    double cores = static_cast<double>(cores_allowed);
    double quota = CpuQuotaCores();
    return (quota > 0.0 && (cores == 0.0 || quota < cores)) ? quota : cores;
  }
  // Memory the process can use: the cgroup limit, else MemAvailable; -1 unknown.
  int64_t UsableMemoryBytes() const {
    if (memory_limit_bytes >= 0) return memory_limit_bytes;
    return memory_available_bytes;
  }
};

// A stage as registered (RegisterStage). parallelism is the value at
// registration; snapshots carry its later changes.
struct StageDef {
  StageId id = kInvalidStage;
  std::string name;
  std::string op;
  uint32_t parallelism = 1;
};

// A worker thread attached to a stage (AttachWorker). `worker` is unique in
// the process for its life, in attach order; spans name it.
struct WorkerDef {
  uint32_t worker = 0;
  StageId stage = kInvalidStage;
  uint32_t os_tid = 0;  // Linux thread id, for matching other tools
  uint64_t attach_ns = 0;
};

// What a stage counts about its elements and its time: the one counter set
// that a worker adds to (WorkerCounters in tracer.h, which the runtime's
// summaries read too), that a snapshot carries, and that the tracer's totals
// and the analyzer's frames are made of. Cumulative.
struct StageCounts {
  uint64_t produced = 0;        // elements passed downstream
  uint64_t consumed = 0;        // elements taken from the input
  uint64_t bytes_produced = 0;  // bytes of the elements produced
  uint64_t work_ns = 0;         // wall time in the stage's own work
  uint64_t wait_input_ns = 0;   // blocked waiting for input
  uint64_t wait_output_ns = 0;  // blocked on a full output buffer

  StageCounts& operator+=(const StageCounts& o) {
    produced += o.produced;
    consumed += o.consumed;
    bytes_produced += o.bytes_produced;
    work_ns += o.work_ns;
    wait_input_ns += o.wait_input_ns;
    wait_output_ns += o.wait_output_ns;
    return *this;
  }
  // The counts since `earlier`, each clamped at 0 (a counter never runs back;
  // a reading taken mid-update may).
  StageCounts Since(const StageCounts& earlier) const {
    auto minus = [](uint64_t a, uint64_t b) { return a > b ? a - b : 0; };
    return StageCounts{minus(produced, earlier.produced),
                       minus(consumed, earlier.consumed),
                       minus(bytes_produced, earlier.bytes_produced),
                       minus(work_ns, earlier.work_ns),
                       minus(wait_input_ns, earlier.wait_input_ns),
                       minus(wait_output_ns, earlier.wait_output_ns)};
  }
};

// One stage's counters at one snapshot: its StageCounts since the session
// started, and what only the sampler knows.
struct StageSnapshot : StageCounts {
  uint64_t time_ns = 0;
  StageId stage = kInvalidStage;
  uint32_t parallelism = 1;
  uint32_t live_workers = 0;
  uint64_t cpu_ns = 0;             // CPU time of the stage's worker threads
  int64_t occupancy_elements = 0;  // gauge: the stage's output buffer now
  int64_t occupancy_bytes = 0;     // gauge
  uint64_t spans_recorded = 0;
  uint64_t spans_dropped = 0;  // sampled but lost: a worker's span ring was full
  // Elements one pass of the stage holds, when known: a source's listing
  // (list_files' matched files, a counted range), or what its first finished
  // pass produced. 0: unknown (an endless source, or no pass finished yet).
  // Appended to the record: older traces read 0.
  uint64_t epoch_elements = 0;
};

// One sampled element: the wall time of one Work() call.
struct SpanRecord {
  StageId stage = kInvalidStage;
  uint32_t worker = 0;
  uint64_t element_id = 0;
  uint64_t begin_ns = 0;
  uint64_t end_ns = 0;
};

// One training step: it waited wait_ns for its input, then ran step_ns,
// ending at end_ns. `consumer` numbers the calling thread (0 for the first).
struct ConsumerStepRecord {
  uint32_t consumer = 0;
  uint64_t wait_ns = 0;
  uint64_t step_ns = 0;
  uint64_t end_ns = 0;
};

// Every step counted, recorded individually or not.
struct ConsumerTotals {
  uint64_t time_ns = 0;
  uint64_t steps = 0;
  uint64_t wait_ns = 0;
  uint64_t step_ns = 0;
  uint64_t steps_recorded = 0;
  uint64_t steps_dropped = 0;
};

// The whole process, from /proc/self, at one snapshot.
struct ProcessSample {
  uint64_t time_ns = 0;
  uint64_t cpu_ns = 0;              // user + system CPU since the session started
  uint64_t rss_bytes = 0;           // gauge
  int64_t read_bytes = -1;          // bytes fetched from storage (/proc/self/io); -1 unreadable
  int64_t read_syscall_bytes = -1;  // bytes read by read(2) and friends, page cache included
  uint32_t threads = 0;
  // Appended. The process's main thread's time runnable but waiting for a
  // core (run-queue delay, /proc/self/schedstat's second field) since the
  // session started; -1 unreadable or a trace that predates it. Off-CPU
  // time with little of it is waiting inside the work (storage, the
  // network, a lock, a sleep), not other programs holding the cores. The
  // main thread, because it is the one that loads samples in a DataLoader's
  // worker (and, without workers, in its main process).
  int64_t main_thread_run_delay_ns = -1;
  // Appended. The recorder's own sampler thread's CPU since the session
  // started (its thread CPU clock, as of its last snapshot); -1 a trace that
  // predates it. The recording's cost in the process: an analysis of the
  // process's CPU takes it out, since the program pays it only while traced.
  int64_t recorder_cpu_ns = -1;
};

// Events that could not be stored, cumulative. Budget sampling (spans or
// steps beyond their per-second budget) is not a drop; a full buffer is.
struct DropCounts {
  uint64_t time_ns = 0;
  uint64_t spans = 0;
  uint64_t consumer_steps = 0;
  uint64_t gpu_records = 0;            // dropped by the tracer (its buffer was full)
  uint64_t gpu_records_at_source = 0;  // dropped by the GPU activity source (CUPTI)
  uint64_t Total() const { return spans + consumer_steps + gpu_records + gpu_records_at_source; }
};

enum class GpuActivityKind : uint32_t { kKernel = 1, kMemcpy = 2, kMemset = 3, kSync = 4 };

// A copy's direction (CUPTI's memcpy kinds, collapsed); kNone for the others.
enum class GpuCopyKind : uint32_t {
  kNone = 0,
  kHostToDevice = 1,
  kDeviceToHost = 2,
  kDeviceToDevice = 3,
  kHostToHost = 4,
  kPeerToPeer = 5,
  kOther = 6,
};

// One GPU operation, with its start and end mapped onto the host clock.
// A kSync record is the host waiting on the GPU (cudaStreamSynchronize and
// friends): its interval is host time blocked, not GPU work.
struct GpuActivity {
  GpuActivityKind kind = GpuActivityKind::kKernel;
  uint32_t device = 0;
  uint32_t stream = 0;
  uint64_t start_ns = 0;
  uint64_t end_ns = 0;
  uint64_t bytes = 0;           // copies and memsets; 0 for kernels
  uint64_t correlation_id = 0;  // ties the activity to the API call that launched it
  std::string name;             // kernel name, or the copy kind ("HtoD")
  // Appended to the version-1 record (older traces read as 0).
  uint32_t context = 0;
  GpuCopyKind copy_kind = GpuCopyKind::kNone;
};

// Whether GPU activity is being recorded, and if not, why. A trace holds
// one when a GPU activity source (pipetune_cupti) was asked for; the last
// one read is the one that holds.
enum class GpuState : uint32_t {
  kRecording = 1,  // activity is being recorded
  kNoGpu = 2,      // no CUDA driver or no device: nothing to record
  kNoCupti = 3,    // the driver is there but libcupti could not be loaded or is too old
  kConflict = 4,   // another CUPTI subscriber holds the process (Nsight, a framework profiler)
  kFailed = 5,     // a CUPTI call failed; message says which
  kStopped = 6,    // recorded, then stopped cleanly
};

// How GPU timestamps were put on the trace's host clock.
enum class GpuClockSource : uint32_t {
  kNone = 0,
  kHostCallback = 1,    // CUPTI calls our timestamp function: already the host clock
  kMeasuredOffset = 2,  // gpu time + clock_offset_ns = host time, measured at start
};

struct GpuStatus {
  uint64_t time_ns = 0;
  GpuState state = GpuState::kNoGpu;
  uint32_t cupti_version = 0;  // cuptiGetVersion, 0 when not loaded
  GpuClockSource clock_source = GpuClockSource::kNone;
  int64_t clock_offset_ns = 0;
  std::string message;  // one sentence for the user: what was found, or why not
};

const char* GpuStateName(GpuState state);
const char* GpuCopyKindName(GpuCopyKind kind);
const char* GpuActivityKindName(GpuActivityKind kind);

// The pipeline a session describes. The header holds the values given to
// Start(); SetPipelineInfo() later in the run writes a newer one.
struct PipelineInfo {
  std::string name;
  std::string config_json;
  // The config file's absolute path, when the run read one; empty otherwise.
  // Relative paths inside the config are relative to its directory, which is
  // what `pipetune tune` needs to write a tuned config somewhere else.
  // Written as an optional trailing field of the pipeline-info chunk (older
  // readers ignore it; older traces lack it).
  std::string config_path;
};

}  // namespace pipetune::tracer

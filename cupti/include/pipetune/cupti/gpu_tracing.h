// GPU activity recording with CUPTI's Activity API, into the running tracer
// session (pipetune/tracer): kernels (CONCURRENT_KERNEL, which keeps kernels
// concurrent, unlike KERNEL), memory copies (direction, bytes), memsets and
// synchronizations, each with device, context, stream and correlation ids.
//
// Contracts:
//  - CUPTI hands us full buffers on its own thread; buffers come from a pool
//    allocated up front (buffers_preallocated) and grown to at most
//    max_buffers. When the pool is exhausted CUPTI drops records; we read
//    CUPTI's drop count for every completed buffer and record it
//    (DropCounts::gpu_records_at_source).
//  - A forced flush runs before each tracer snapshot (the tracer's snapshot
//    hook) and at Stop, so that each snapshot holds the activity up to it.
//  - Timestamps are on the trace's host clock: CUPTI asks our clock
//    (cuptiActivityRegisterTimestampCallback) when the library has it;
//    otherwise the offset between CUPTI's clock and ours is measured at start
//    and added to every record, and both are recorded in the GPU status.
//  - Another CUPTI subscriber (Nsight Systems/Compute, a framework's own
//    profiler) makes Start return a kConflict status: recording goes on
//    without GPU activity. Nothing here aborts, throws or blocks the program
//    beyond a flush.
//  - The state (recording, or why not) is written to the trace as a
//    GpuStatus record, so reports can say why a trace has no GPU activity.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "pipetune/cupti/cupti_api.h"
#include "pipetune/tracer/records.h"

namespace pipetune::cupti {

struct RecorderOptions {
  size_t buffer_bytes = 4u << 20;  // one CUPTI buffer
  size_t buffers_preallocated = 2;
  size_t max_buffers = 16;  // the pool's cap: 64 MB at most with the defaults
};

// What the recorder has done so far (for tests and the final status line).
struct RecorderStats {
  uint64_t records = 0;            // converted and handed to the tracer
  uint64_t records_skipped = 0;    // kinds we do not record, or invalid
  uint64_t dropped_at_source = 0;  // CUPTI's own drop counts, summed
  uint64_t buffers_allocated = 0;
  uint64_t buffers_refused = 0;  // requests the capped pool could not serve
  uint64_t flushes = 0;
};

// One recorder per process (CUPTI's buffer callbacks carry no user data).
class GpuActivityRecorder {
 public:
  GpuActivityRecorder(std::unique_ptr<CuptiApi> api, const RecorderOptions& options = {});
  ~GpuActivityRecorder();  // stops if still recording
  GpuActivityRecorder(const GpuActivityRecorder&) = delete;
  GpuActivityRecorder& operator=(const GpuActivityRecorder&) = delete;

  // Subscribes, aligns clocks, enables the activity kinds and installs the
  // snapshot hook. The returned status is also recorded in the trace.
  tracer::GpuStatus Start();
  // Forced flush of every buffer CUPTI holds (also the snapshot hook).
  void Flush();
  // Flushes, disables the kinds, unsubscribes; records a kStopped status.
  tracer::GpuStatus Stop();

  bool recording() const;
  RecorderStats stats() const;
  tracer::GpuStatus status() const;

  struct State;  // opaque; public only so that CUPTI's C callbacks can reach it

 private:
  std::unique_ptr<State> state_;
};

// For programs that link pipetune::cupti themselves (and the injection
// library): LoadCupti then Start a process-wide recorder. Returns the status
// (also in the trace). Safe to call more than once; later calls return the
// first call's status.
tracer::GpuStatus StartGpuTracing(const LoadOptions& load = {}, const RecorderOptions& options = {});
// Stops the process-wide recorder, if any.
void StopGpuTracing();

}  // namespace pipetune::cupti

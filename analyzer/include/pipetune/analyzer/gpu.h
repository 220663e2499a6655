// Is the GPU waiting for data? From the GPU activity in a trace: how busy
// each device was (the union of its kernel, copy and memset intervals, so
// concurrent streams are not counted twice), its idle gaps, and which of
// those gaps the input pipeline caused:
//  - when the trace records the consumer, the part of a gap during which the
//    consumer waited for its next batch is an input stall;
//  - when it does not (a program that links no tracer, profiled through
//    CUDA's injection), a gap ended by a host-to-device copy (the next batch
//    arriving) is taken for an input stall, and the result says inferred.
// Host waits on the GPU (synchronization records) are not GPU work.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace pipetune::analyzer {

struct GpuInterval {
  uint32_t device = 0;
  uint64_t start_ns = 0;
  uint64_t end_ns = 0;
  bool host_to_device = false;  // a copy of input onto the device
};

struct GpuAnalysisInput {
  std::vector<GpuInterval> work;  // kernels, copies, memsets
  // When the consumer waited for its next batch: [begin, end) on the same clock.
  std::vector<std::pair<uint64_t, uint64_t>> consumer_waits;
  bool consumer_recorded = false;  // the trace records consumer steps at all
  uint64_t begin_ns = 0;           // the window analysed
  uint64_t end_ns = 0;
};

enum class GpuVerdict {
  kNoActivity,    // no GPU work in the window
  kGpuBound,      // busy most of the time: a faster input pipeline cannot help
  kInputStalled,  // idle, mostly waiting for input: tuning the pipeline can help
  kOtherIdle,     // idle, mostly for other reasons (host code, synchronization)
};

struct GpuDeviceUsage {
  uint32_t device = 0;
  double busy_fraction = 0;
  double idle_seconds = 0;
  double input_stall_seconds = 0;
};

struct GpuAnalysis {
  std::vector<GpuDeviceUsage> devices;  // by device id
  double busy_fraction = 0;             // mean over devices
  double idle_seconds = 0;              // summed over devices
  double input_stall_seconds = 0;
  double other_idle_seconds = 0;
  double input_stall_share = 0;  // input_stall / idle; 0 when never idle
  uint64_t gaps = 0;
  uint64_t input_stall_gaps = 0;
  bool inferred = false;  // no consumer recorded: stalls inferred from host-to-device copies
  GpuVerdict verdict = GpuVerdict::kNoActivity;
};

// Busy at or above this: GPU-bound. An input-stall share at or above
// kInputStallShare of the idle time: input-stalled.
inline constexpr double kGpuBoundBusy = 0.9;
inline constexpr double kInputStallShare = 0.5;

GpuAnalysis AnalyzeGpu(const GpuAnalysisInput& input);

const char* GpuVerdictName(GpuVerdict verdict);  // "gpu_bound", "input_stalled", ...
// One sentence for a report: how busy, how much of the idle time was input,
// and whether tuning the input pipeline can help.
std::string GpuVerdictSentence(const GpuAnalysis& analysis);

}  // namespace pipetune::analyzer

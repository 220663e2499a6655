// The GPU's part of a Diagnosis (gpu.h's analysis over a window), and the
// whole Diagnosis of a trace that holds GPU activity but no pipeline.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "pipetune/analyzer/diagnosis.h"

namespace pipetune::analyzer::internal {

// Over [begin_ns, end_ns), relative to the session's start.
GpuSummary SummarizeGpu(const CollectedTrace& trace, uint64_t begin_ns, uint64_t end_ns);

// A trace with no stages (a program that links no pipetune tracer, profiled
// through CUDA's injection), or only a GPU status (no GPU found): the window
// is the whole trace, the summary is the GPU's verdict.
Diagnosis DiagnoseGpuOnly(const CollectedTrace& trace, const std::string& trace_name);

// A DataLoader process's GPU activity: the CUDA injection records it into
// T.gpu.<pid> (cupti/src/injection.cc), a session of its own beside the
// recorder's MAIN (T itself, or T.main.<pid> for another rank of T's job).
// Put on MAIN's time (both are the host's CLOCK_MONOTONIC) and analysed over
// the training loop, [loop_begin_s, loop_end_s) since MAIN's start, against
// the loop's waits in next() (MAIN's `*/next` spans: an input stall is the
// GPU idle while the loop waited for a batch). When the spans do not cover
// every call (their per-second budget ran out), the stalls are inferred from
// the GPU's own timeline, as for a program with no recorder. nullopt when
// there is no such file or it cannot be read (the reason in `warning`).
// `pid`: MAIN's process.
std::optional<GpuSummary> DataLoaderGpu(const std::string& main_trace, int pid, double loop_begin_s,
                                        double loop_end_s, std::string& warning);

}  // namespace pipetune::analyzer::internal

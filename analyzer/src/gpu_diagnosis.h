// The GPU's part of a Diagnosis (gpu.h's analysis over a window), and the
// whole Diagnosis of a trace that holds GPU activity but no pipeline.
#pragma once

#include <cstdint>
#include <string>

#include "pipetune/analyzer/diagnosis.h"

namespace pipetune::analyzer::internal {

// Over [begin_ns, end_ns), relative to the session's start.
GpuSummary SummarizeGpu(const CollectedTrace& trace, uint64_t begin_ns, uint64_t end_ns);

// A trace with no stages (a program that links no pipetune tracer, profiled
// through CUDA's injection), or only a GPU status (no GPU found): the window
// is the whole trace, the summary is the GPU's verdict.
Diagnosis DiagnoseGpuOnly(const CollectedTrace& trace, const std::string& trace_name);

}  // namespace pipetune::analyzer::internal

// What `pipetune profile -- COMMAND` needs to record a program's GPU
// activity without changing it: the environment that makes CUDA load
// pipetune's CUPTI injection library, a GPU probe, and the step after the
// program ends that makes sure the trace says where GPU activity stands.
//
// CUDA loads the library named by CUDA_INJECTION64_PATH when a program
// initialises CUDA and calls its InitializeInjection (docs/gpu.md). A value
// of "none" counts as unset. A value the user already set (another tool's
// injection) is left alone, and the note says GPU activity goes there.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "pipetune/base/status.h"
#include "pipetune/tracer/records.h"

namespace pipetune::tracer {

// The injection library to use: $PIPETUNE_CUPTI_INJECTION when set, else
// libpipetune_cupti_injection.so in ../lib/ beside the running executable
// (the build tree's and an install's layout). Empty when there is none
// (pipetune built without CUPTI).
std::string FindInjectionLibrary();

// The variables to set in the profiled program's environment for GPU
// activity. `current_injection` is the caller's CUDA_INJECTION64_PATH (null
// when unset). `note` is set when GPU activity will not be recorded and why.
std::vector<std::pair<std::string, std::string>> GpuProfileEnvironment(const std::string& injection_library,
                                                                       const char* current_injection,
                                                                       std::string* note);

// Is there a GPU here? Loads libcuda.so.1 (PIPETUNE_LIBCUDA overrides) and
// asks for devices. kRecording is never returned: kNoGpu with the reason,
// or kStopped saying how many GPUs were found and that the program recorded
// no GPU activity.
GpuStatus ProbeGpu();

// After the profiled program ended, makes sure its trace says where GPU
// activity stands: when the program wrote no trace (it links no tracer and
// recorded no GPU activity), writes one holding only a header (naming
// `program`) and a GPU status; when its trace has no GPU status (it never
// initialised CUDA), appends one. The status is ProbeGpu()'s, with
// `gpu_note` (GpuProfileEnvironment's) as the message when a GPU is there.
// *wrote_trace says whether the file was created here. Errors: the file
// cannot be read or written.
Status CompleteProfileTrace(const std::string& path, const std::string& program, const std::string& gpu_note,
                            bool* wrote_trace);

}  // namespace pipetune::tracer

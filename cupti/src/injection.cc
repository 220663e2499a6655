// libpipetune_cupti_injection.so: what CUDA loads when CUDA_INJECTION64_PATH
// names it (`pipetune profile` sets it). CUDA calls InitializeInjection while
// it initialises, in any CUDA program, PyTorch included, unchanged.
//
// The library carries its own copy of the tracer (linked statically, its
// symbols hidden). That copy started a session from PIPETUNE_TRACE when the
// library was loaded, unless the program links pipetune's tracer itself: that
// one took PIPETUNE_TRACE before main(), and such a program records its GPU
// activity by linking pipetune::cupti (StartGpuTracing); the injection then
// stays out of its way (two CUPTI subscribers cannot coexist).
//
// A Python program profiled by `pipetune profile` is the third case: its
// recorder (python/pipetune) took PIPETUNE_TRACE for the DataLoader's trace
// and set PIPETUNE_GPU_TRACE=PREFIX in its place, so the injection records
// the process's GPU activity into a session of its own, PREFIX.<pid>, read
// with the DataLoader's traces (analyzer/dataloader_trace.h). One file per
// process: a worker that initialises CUDA does not share the main one's.
#include <unistd.h>

#include <cstdlib>
#include <string>

#include "pipetune/cupti/gpu_tracing.h"
#include "pipetune/tracer/tracer.h"

extern "C" __attribute__((visibility("default"))) int InitializeInjection(void) {
  using namespace pipetune;
  if (!tracer::Enabled()) {
    const char* prefix = std::getenv("PIPETUNE_GPU_TRACE");
    if (prefix == nullptr || *prefix == '\0') return 1;  // no session of ours: nothing to record into
    tracer::SessionOptions session;
    session.path = std::string(prefix) + "." + std::to_string(::getpid());
    session.pipeline_name = "gpu";
    if (!tracer::Start(session).ok()) return 1;  // the program runs on, unrecorded
    std::atexit([] { (void)tracer::Stop(); });   // runs after StopGpuTracing, registered below
  }
  cupti::LoadOptions load;
  load.probe_devices = false;  // CUDA is initialising (it loaded us): do not call back into it
  tracer::GpuStatus status = cupti::StartGpuTracing(load);
  // Registered after the tracer's own atexit (at load), so it runs first:
  // the last GPU records reach the session before it writes its end.
  if (status.state == tracer::GpuState::kRecording) std::atexit(&cupti::StopGpuTracing);
  return 1;  // CUDA ignores the value; 1 is what NVIDIA's samples return
}

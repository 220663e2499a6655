// Online tuning of a running pipeline (`pipetune autotune CONFIG`): the
// config runs once, unrestarted, and every few seconds the one model
// (the analyzer's profile of the run's own trace, the tuner's Solve) is
// refit and its plan applied live: map/read_file workers and prefetch
// buffers resized (runtime::Pipeline::SetParallelism, SetBuffer). At the
// end the settled knobs are written as a config.
//
// Usage:
//   workflow::AutotuneRequest request;
//   request.config_path = "pipeline.json";
//   request.seconds = 20;
//   request.on_decision = [](const workflow::AutotuneDecision& d) { ... print ... };
//   StatusOr<workflow::AutotuneResult> result = workflow::Autotune(request);
//
// The loop (what is decided at each refit, within which budgets) is the
// controller's, shared with pipetune.Loader(autotune=True):
// workflow/autotune_controller.h. This file is its driver for a config run
// once: the run's progress callback steps it every 250 ms.
//
// Contract: one traced run at a time per process (the tracer has one
// session); the trace is closed before Autotune returns.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "pipetune/base/status.h"
#include "pipetune/models/config.h"
#include "pipetune/runtime/pipeline.h"
#include "pipetune/tuner/plan.h"
#include "pipetune/tuner/tune_input.h"
#include "pipetune/workflow/autotune_controller.h"
#include "pipetune/workflow/tune.h"

namespace pipetune::workflow {

// The controller's options (refit interval, budgets, tolerance, minimum
// gain, on_decision: called on the run's monitor thread) and the run's.
struct AutotuneRequest : AutotuneControllerOptions {
  std::string config_path;
  double seconds = 20;                                  // how long the pipeline runs (> 0)
  std::string output;                                   // empty: STEM.autotuned.json beside the config
  std::string trace_path;                               // empty: OUTPUT.ptrace, kept for `report`
  const runtime::FunctionRegistry* registry = nullptr;  // null: the built-ins
  const std::atomic<bool>* interrupt = nullptr;         // see runtime::RunOptions
};

struct AutotuneResult : AutotuneStats {
  runtime::RunSummary summary;  // the whole run
  TunedConfig written;          // the settled knobs
  std::string trace_path;
};

// Errors: the config does not load or build (kInvalidInput naming file,
// stage and key), a bad request (seconds <= 0), an element function fails
// (kFailed), the trace or the config cannot be written (kIoError). A refit
// that fails (a trace too short, a plan that does not fit) is not an error:
// the run goes on with its knobs and the decision says why.
StatusOr<AutotuneResult> Autotune(const AutotuneRequest& request);

}  // namespace pipetune::workflow

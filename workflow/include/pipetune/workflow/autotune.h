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
// The loop, decided at each refit (docs/tuner.md, "Online: autotune"):
//  - a change waiting to be judged is judged on the window since it: kept,
//    or rolled back when it measured below (1 - tolerance) x its prediction
//    and no better than the rate before it (better: by min_gain and by twice
//    the two windows' standard error);
//  - else the model is refit on the trace since the last change, and its
//    plan's knobs that differ from the running ones are applied when the
//    plan predicts at least min_gain over the measured rate and over the
//    prediction of the change kept before (buffers follow any applied plan);
//  - nothing worth changing (or only what was rolled back): settled, and no
//    further refit runs.
// Budgets: the plan's (tuner::ResolveResources: flags, the config's
// resources, the host), so no applied configuration exceeds them; no cache
// and no inserted stage (neither can be added to a running pipeline: a plan
// that wants one says so in the notes).
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
#include "pipetune/workflow/tune.h"

namespace pipetune::workflow {

struct AutotuneRequest {
  std::string config_path;
  double seconds = 20;             // how long the pipeline runs (> 0)
  double refit_every_seconds = 2;  // the model is refit this often until settled
  tuner::BudgetFlags budgets;
  std::string output;      // empty: STEM.autotuned.json beside the config
  std::string trace_path;  // empty: OUTPUT.ptrace, kept for `report`
  // A change is rolled back when it measured below (1 - tolerance) of what
  // its plan predicted and did not beat the rate before it.
  double tolerance = 0.10;
  // A plan is applied only when it predicts at least this much over the
  // measured rate: below it the gain is within the noise of a 2 s window.
  double min_gain = 0.03;
  const runtime::FunctionRegistry* registry = nullptr;  // null: the built-ins
  const std::atomic<bool>* interrupt = nullptr;         // see runtime::RunOptions
  // Called (on the run's monitor thread) as each decision is made and again
  // once it is judged.
  std::function<void(const struct AutotuneDecision&)> on_decision;
};

// One knob of one stage, before and after.
struct KnobMove {
  std::string stage;
  tuner::Knob knob = tuner::Knob::kParallelism;  // kParallelism or kBuffer
  int64_t old_value = 0;
  int64_t new_value = 0;
};

struct AutotuneDecision {
  enum class Kind { kChange, kKept, kRolledBack, kSettled, kDeclined };
  Kind kind = Kind::kChange;
  double seconds = 0;  // since the run started
  std::vector<KnobMove> moves;
  double measured_before = 0;      // outputs/s in the window the refit read
  double predicted = 0;            // the plan's outputs/s
  std::optional<double> measured;  // outputs/s after the change (kKept, kRolledBack)
  double refit_ms = 0;             // trace read + profile + solve
  std::string note;                // kDeclined / kSettled: why
};

const char* DecisionKindName(AutotuneDecision::Kind kind);  // "change", "kept", ...
// One line: `12.1 s  change  work parallelism 1 -> 3, prefetch buffer 2 -> 9  predicted 812/s (measured
// 301/s)`.
std::string FormatDecision(const AutotuneDecision& decision);

struct AutotuneResult {
  std::vector<AutotuneDecision> decisions;
  runtime::RunSummary summary;               // the whole run
  TunedConfig written;                       // the settled knobs
  std::optional<double> settled_at_seconds;  // nullopt: still exploring at the end
  int refits = 0;
  double refit_ms_mean = 0;
  double refit_ms_max = 0;
  std::string trace_path;
};

// Errors: the config does not load or build (kInvalidInput naming file,
// stage and key), a bad request (seconds <= 0), an element function fails
// (kFailed), the trace or the config cannot be written (kIoError). A refit
// that fails (a trace too short, a plan that does not fit) is not an error:
// the run goes on with its knobs and the decision says why.
StatusOr<AutotuneResult> Autotune(const AutotuneRequest& request);

}  // namespace pipetune::workflow

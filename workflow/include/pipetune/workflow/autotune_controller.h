// The online tuning loop, written once: a controller that attaches to a
// running runtime::Pipeline and its trace and, stepped by a driver, refits
// the one model (the analyzer's profile of the trace, the tuner's Solve)
// and applies its plan live (Pipeline::SetParallelism, SetBuffer). Two
// drivers step it: `pipetune autotune CONFIG` (workflow/autotune.h, from
// its run's progress callback) and pipetune.Loader's autotune=True
// (loader/src/loader_c.cc, from a thread of its own).
//
// Usage (a driver):
//   AutotuneController controller(options, config, trace_path, config_path);
//   controller.Attach(pipeline.get(), config);    // when built (again)
//   every ~250 ms, on one thread:  controller.Step(seconds_since_start);
//   before the pipeline goes:      controller.Attach(nullptr, {});
//   at the end:                    controller.Finish();
//   models::PipelineConfig settled = controller.SettledOn(original);
//
// The loop, decided at each refit by the retuning rules every driver shares
// (workflow/retune_loop.h; docs/tuner.md, "The retuning rules"): the window
// since the last change is measured (its rate and its own spread) and
// judged when it ran a change (kept: it beat the best measured setting
// beyond the noise; rolled back: it did not); then the model is refit on it
// and its plan's workers are tried when the rules allow (never measured, a
// gain predicted over the best measured rate and by the model's own account,
// under the cap on tries), else the loop
// settles on the best measured knobs (a buffer the queue model sizes
// differently for them is applied then: it moves no bound) and no further
// refit runs. A prediction is the plan's, the consumer's measured rate
// being the model's demand (models/profile.h), so no plan counts capacity
// the consumer cannot take.
// Budgets: the plan's (tuner::ResolveResources: the budget flags, the
// config's resources, the host), so no applied configuration exceeds them;
// no cache and no inserted stage (neither can be added to a running
// pipeline: a plan that wants one says so in a decision).
//
// Threads: Step, and Finish once the stepping has stopped, on one driver
// thread; Attach, CurrentConfig and SettledOn from any thread. A refit (the
// slow part: the trace read, the profile, the solve) holds no lock, so the
// thread that builds or drains the pipeline never waits for one; only an
// applied change holds the lock, for the resize calls themselves.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "pipetune/analyzer/collector.h"
#include "pipetune/base/json.h"
#include "pipetune/base/status.h"
#include "pipetune/models/config.h"
#include "pipetune/runtime/pipeline.h"
#include "pipetune/tuner/plan.h"
#include "pipetune/tuner/tune_input.h"
#include "pipetune/workflow/retune_loop.h"

namespace pipetune::workflow {

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
  double predicted = 0;            // the plan's outputs/s (the consumer's demand bounds it)
  std::optional<double> measured;  // outputs/s after the change (kKept, kRolledBack)
  double refit_ms = 0;             // trace read + profile + solve
  std::string note;                // kDeclined / kSettled: why
};

const char* DecisionKindName(AutotuneDecision::Kind kind);  // "change", "kept", ...
// One line: `12.1 s  change  work parallelism 1 -> 3, prefetch buffer 2 -> 9  predicted 812/s (measured
// 301/s)`.
std::string FormatDecision(const AutotuneDecision& decision);
// {"kind", "seconds", "moves": [{"stage", "knob", "old", "new"}], "predicted",
// "measured_before", "measured" (null until judged), "refit_ms", "note",
// "line": FormatDecision's}: what the Loader hands to Python.
Json DecisionToJson(const AutotuneDecision& decision);

// What the loop is told; the drivers' requests carry these.
struct AutotuneControllerOptions {
  double refit_every_seconds = 2;  // the model is refit this often until settled
  tuner::BudgetFlags budgets;
  // When a change is worth trying and keeping, and how many are tried.
  RetuneRules rules;
  // Called (on the driver's thread) as each decision is made and again once
  // it is judged.
  std::function<void(const AutotuneDecision&)> on_decision;
};

// What the loop did.
struct AutotuneStats {
  std::vector<AutotuneDecision> decisions;
  std::optional<double> settled_at_seconds;  // nullopt: still exploring at the end
  int refits = 0;
  double refit_ms_mean = 0;
  double refit_ms_max = 0;
};

// Workers a stage may be resized to (runtime::BuildOptions::resizable_workers):
// the thread budget, else the tuner's default thread budget.
int ResizableWorkers(const tuner::BudgetFlags& budgets);

// Where the settled config goes by default: STEM.autotuned.json beside the
// config (`tune`'s STEM.tuned.json is not overwritten).
std::string AutotunedConfigPath(const std::string& config_path);

// Checks what a driver passes on from its user: a refit interval > 0, a
// minimum gain in [0, 1), at least one try. kInvalidInput naming the option.
Status ValidateControllerOptions(const AutotuneControllerOptions& options);

class AutotuneController {
 public:
  // `config`: the knobs the pipeline starts with (its stage names are the
  // ones the trace records); `trace_path`: the running pipeline's trace, read
  // at each refit; `config_path`: recorded in the trace with each change.
  AutotuneController(AutotuneControllerOptions options, models::PipelineConfig config, std::string trace_path,
                     std::string config_path);

  // Attaches a pipeline built from `built_from` and brings it to the knobs
  // decided so far (a pipeline rebuilt for a new pass keeps them); null
  // detaches (before the pipeline is destroyed). Decisions made while none
  // is attached change the knobs of the next one.
  void Attach(runtime::Pipeline* pipeline, const models::PipelineConfig& built_from);

  // The driver's tick: refits when one is due (every refit_every_seconds of
  // `seconds`, the driver's clock since the start) and not settled.
  void Step(double seconds);

  // After the run (detached, stepping stopped): a change still waiting is
  // judged on what the trace holds since it; one that cannot be judged is
  // left out of the settled knobs.
  void Finish();

  // The knobs running now (decided so far), as a config.
  models::PipelineConfig CurrentConfig() const;
  // `original` with each of its stages' knobs (workers, buffer) as decided:
  // what is written as the settled config. Stages are matched by name, so
  // `original` may hold stages the running pipeline dropped.
  models::PipelineConfig SettledOn(const models::PipelineConfig& original) const;
  bool settled() const;
  AutotuneStats TakeStats();

 private:
  struct Refitted {
    tuner::Plan plan;
    uint64_t trace_end_ns = 0;
    double rate_error = 0;  // the relative standard error of the window's rate
  };

  void Refit(bool final);
  StatusOr<std::optional<Refitted>> Solve();
  void Judge(const RetuneLoop::Judged& judged, double measured, double refit_ms);
  void Propose(const tuner::Plan& plan, uint64_t trace_end_ns, double refit_ms);
  void SettleOnBest(AutotuneDecision decision, const models::PipelineConfig* plan_knobs);
  void Decline(const std::string& why, double refit_ms);
  void Apply(const std::vector<KnobMove>& moves);
  void NoteOnce(const std::string& note);
  void Record(AutotuneDecision decision);

  const AutotuneControllerOptions options_;
  const std::string config_path_;

  // Guards pipeline_ and current_ (written by the driver, read by others).
  mutable std::mutex mu_;
  runtime::Pipeline* pipeline_ = nullptr;
  models::PipelineConfig current_;

  // The driver's state.
  analyzer::LiveTraceCollector trace_;  // read on from where the last refit stopped
  double now_seconds_ = 0;
  double next_refit_seconds_;                // the first after one interval: a window to measure
  uint64_t last_change_ns_ = 0;              // trace time of the last frame read before the last change
  std::optional<AutotuneDecision> pending_;  // applied, not yet judged
  RetuneLoop loop_;
  models::PipelineConfig best_;  // the knobs of the best measured window
  std::vector<std::string> notes_;
  std::atomic<bool> settled_{false};
  double refit_ms_total_ = 0;
  AutotuneStats stats_;
};

}  // namespace pipetune::workflow

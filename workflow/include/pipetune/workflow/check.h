// The CI gate: compare a pipeline against its committed baseline and say
// whether it regressed, where, and why; `pipetune check` prints the report
// and leaves with ExitCodeFor(outcome).
//
// Three judgements, in this order:
//   config      the knobs against the baseline's (parallelism, prefetch
//               buffer, a cache added or removed), priced by the rate model
//               from the baseline's profile: no run needed. Fails when the
//               predicted throughput drops beyond the tolerance.
//   cost        per stage, CPU seconds per element of the new runs against
//               the baseline's runs (gate_stats.h: a shift beyond the
//               tolerance, separated from noise). CPU per element is counted
//               on the stage's own worker threads, so a busy machine that
//               delays the threads barely moves it; a stage that costs more
//               fails even when throughput has not moved yet. Stages under
//               5% of the pipeline's CPU per output are not judged: their
//               per-element cost is mostly clock granularity.
//   throughput  outputs per second against the baseline's, the same test; a
//               drop names the stage that binds now and why (the diagnosis
//               of the last new run).
// Machine drift: when at least two judged stages all grew, each beyond the
// tolerance and by about one factor, the machine (slower, or busier with
// work that steals cache and turbo headroom) is blamed rather than a stage:
// verdict `machine`, a failure only with `strict_machine`. The same verdict
// when throughput fell but no stage costs more and the CPU-bound stages'
// threads spent longer waiting for a core (wall over CPU time per element
// grew beyond the tolerance): other processes took the cores.
//
// A baseline of another pipeline (its stages' names, ops or functions differ
// from the config's, prefetch and cache stages aside) is refused as bad input
// rather than compared. Changed args (a decoder's settings) are the same
// pipeline: the report notes it and compares the costs.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "pipetune/base/status.h"
#include "pipetune/models/config.h"
#include "pipetune/workflow/baseline.h"
#include "pipetune/workflow/exit_code.h"
#include "pipetune/workflow/gate_stats.h"

namespace pipetune::workflow {

enum class Verdict { kPass, kRegression, kMachine };
const char* VerdictName(Verdict verdict);  // "pass", "regression", "machine"

struct StageCheck {
  std::string name;
  Shift cpu_per_element;  // seconds per element, baseline vs now
  bool judged = false;    // heavy enough to judge (see above)
  bool regressed = false;
  std::string why;  // one sentence for the report
};

struct KnobChange {
  std::string stage;
  std::string knob;      // "parallelism", "buffer", "cache", "stage"
  std::string baseline;  // as the config spells it; "none" when absent
  std::string now;
  // The model's predicted throughput change from this knob alone (-0.5: half
  // the throughput); nullopt when the model does not price it (prefetch).
  std::optional<double> predicted_change;
};

struct CheckReport {
  Verdict verdict = Verdict::kPass;
  std::string pipeline;
  double tolerance = 0;
  bool timed = false;  // new runs were measured (not a config-only check)

  Shift throughput;  // outputs per second
  bool throughput_regressed = false;
  std::optional<std::string> bottleneck;  // of the last new run
  std::string why;

  std::vector<StageCheck> stages;

  std::vector<KnobChange> knobs;
  double predicted_before = 0;  // the model, baseline profile, baseline knobs
  double predicted_after = 0;   //   ... with the new knobs
  double predicted_change = 0;
  bool config_regressed = false;

  bool machine_drift = false;
  double machine_factor = 1;  // the common cost ratio when drifting
  // Throughput fell with every cost steady while the CPU-bound stages' wall
  // time per element grew against their CPU time: the machine is busier.
  bool machine_busy = false;
  Shift contention;  // wall / CPU per element of the CPU-bound stages

  std::vector<std::string> notes;  // args changed, host differs, ...
};

struct JudgeOptions {
  double tolerance = 0.10;  // the smallest change that matters
  double confidence = 0.95;
};

// The pure part, one function for every kind of run: the baseline against
// `now` (what MeasureRuns returns: the new pipeline's knobs, a config or a
// DataLoader's settings with its profile, and its runs; no runs: the knobs
// alone). The kind's adapter judges the knobs (a config's priced on the
// baseline's profile; a DataLoader's settings on the new run's profile, as
// the baseline keeps no worker group), then the runs are judged by the same
// statistics and rules whatever their kind. `now` must already be known to
// be the baseline's pipeline (SameRun).
CheckReport Judge(const Baseline& baseline, const MeasuredRuns& now, const JudgeOptions& options);

// Ok when `now` is of the pipeline `baseline` was recorded from: a config's
// stages' names, ops and functions (prefetch and cache aside); a
// DataLoader's dataset class, batch size and stages (a transform added,
// removed or renamed is another loader). Else kInvalidInput saying what
// differs.
Status SameRun(const Baseline& baseline, const MeasuredRuns& now, const std::string& baseline_name);

struct CheckRequest {
  std::string baseline_path;
  std::string config_path;           // run this config, or
  std::vector<std::string> traces;   // judge these runs, or
  std::vector<std::string> command;  // run this program (a DataLoader's baseline)
  int runs = 5;                      // 0: the config alone, no timing
  double seconds = 2;
  JudgeOptions judge;
  bool strict_machine = false;
};

// Loads, compares, measures and judges. Errors (exit 2): the baseline or
// config unreadable or malformed, a baseline of another pipeline, a run or
// trace that fails (a program that exits non-zero: kFailed with its status,
// no verdict), a DataLoader trace set missing a worker's trace.
StatusOr<CheckReport> Check(const CheckRequest& request);

// kFailed for `regression`, and for `machine` when strict.
CheckOutcome OutcomeOf(const CheckReport& report, bool strict_machine);

// Renderings: the JSON object of `--format json`, the terminal text, the
// Markdown of a CI job summary, and JUnit XML (one test case per stage, one
// for throughput, one for the config).
Json CheckReportToJson(const CheckReport& report);
std::string FormatCheckText(const CheckReport& report);
std::string FormatCheckMarkdown(const CheckReport& report);
std::string FormatCheckJunit(const CheckReport& report);

}  // namespace pipetune::workflow

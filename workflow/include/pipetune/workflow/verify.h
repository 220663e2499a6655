// `pipetune tune CONFIG --verify`: the closed loop (run the plan, measure,
// refit, re-plan, and keep the best measured; docs/tuner.md). It runs
// pipelines, so it sits in the workflow, above the solver (tuner/, which only
// sees profiles) and the runtime.
//
// Round 0 runs the config as given, traced. Every round then profiles its
// trace together with the traces of the rounds before it (their per-stage
// latencies at other parallelism levels are scaling points, so a stage whose
// latency grows with its workers -- a lock inside its function -- gets a
// fitted curve instead of the linear assumption), solves, and the next round
// runs the plan. The loop stops after `rounds` plans, or earlier when a plan
// changes nothing. The result keeps every round, measured against predicted,
// and the round that measured best.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "pipetune/base/status.h"
#include "pipetune/models/config.h"
#include "pipetune/runtime/function_registry.h"
#include "pipetune/runtime/pipeline.h"
#include "pipetune/tuner/plan.h"
#include "pipetune/tuner/solver.h"
#include "pipetune/tuner/tune_input.h"
#include "pipetune/workflow/tune.h"

namespace pipetune::workflow {

// What the loop is doing, for a progress line.
struct Phase {
  int round = 0;
  int rounds = 0;
  std::string what;  // "running", "tuning"
};

struct VerifyOptions {
  double seconds = 3;  // each measured run
  int rounds = 3;      // plans to run after round 0
  tuner::Objective objective = tuner::Objective::kMax;
  tuner::BudgetFlags budgets;
  tuner::SolverOptions solver;
  std::string base_dir;  // relative paths in the config resolve here
  // Where the traces go. Empty: a fresh directory under the system's temp
  // directory, removed when the loop ends.
  std::string trace_dir;
  const runtime::FunctionRegistry* registry = nullptr;  // null: the built-ins
  // `--handoff-ns`: the hand-off cost every round's plan prices a map fusion
  // with (TuneRequest::handoff_ns); unset: measured once for the loop.
  std::optional<double> handoff_ns;
  std::function<void(const Phase&)> on_phase;
  std::function<void(const runtime::Progress&)> on_run_progress;
};

struct Round {
  int index = 0;
  models::PipelineConfig config;   // what ran
  std::string changes;             // vs round 0's config, in a few words
  std::string trace_path;          // empty once the temporary directory is gone
  double measured_throughput = 0;  // the profile's steady window
  double run_throughput = 0;       // the whole run (the runtime's summary)
  // The model's prediction for this config: round 0's from its own trace,
  // later rounds' from the plan that chose them.
  double predicted_throughput = 0;
  int threads = 0;  // stage threads the config runs
  bool has_plan = false;
  tuner::Plan plan;  // made from this round's traces (the next round's config)
};

struct VerifyResult {
  std::vector<Round> rounds;
  size_t best = 0;          // index into rounds
  std::string stop_reason;  // "3 rounds", "the plan changed nothing", ...
};

// The round a tuning loop keeps, for configs and DataLoaders alike. max: the
// highest measured throughput. demand: among the rounds that measured at
// least 95% of the demand, the one with the fewest threads (workers); else
// the highest. An empty list: 0.
struct RoundScore {
  double measured_throughput = 0;
  int threads = 0;
};
size_t PickBestRound(const std::vector<RoundScore>& rounds, tuner::Objective objective,
                     std::optional<double> demand);

// The closed loop itself, for every pipeline (a config here, a DataLoader in
// dataloader_verify.h): what differs is only how a round runs and how its plan is
// applied, which `step` does. step(round, plan_next) runs round `round`'s
// settings (round 0: as given; later: the previous round's plan), measures
// them and, when plan_next, plans the next round. The loop stops after
// `rounds` plans, or when a plan changes nothing, and picks the best round
// by PickBestRound. A step's error ends the loop with it.
// The threads a config runs: each parallel stage's workers, one for every
// other stage (a loop round's cost, and a retuning window's).
int ThreadsOf(const models::PipelineConfig& config);

struct LoopStep {
  double measured_throughput = 0;
  int threads = 0;                      // threads or workers the round ran
  std::optional<double> demand;         // the consumer's rate, where known
  bool plan_changes_something = false;  // with plan_next: the next round differs
};
struct LoopOutcome {
  size_t rounds_run = 0;
  size_t best = 0;
  std::string stop_reason;  // "3 rounds of tuning", "the plan changed nothing"
};
StatusOr<LoopOutcome> RunTuningLoop(int rounds, tuner::Objective objective,
                                    const std::function<StatusOr<LoopStep>(int round, bool plan_next)>& step);
// A program round's step (a DataLoader's or a tf.data script's), from the
// plan its trace gave: the rate measured, the threads or workers that ran,
// the consumer's rate as demand; with `plan_next`, whether the next round's
// settings differ (`changes`), and the plan's prediction for that round
// kept in `predicted`.
LoopStep ProgramRoundStep(const tuner::Plan& plan, int threads, bool plan_next, bool changes,
                          double& predicted);

// Errors: the config does not build or a run fails (kInvalidInput /
// kFailed), traces cannot be written (kIoError), no plan fits the budgets.
StatusOr<VerifyResult> VerifyTune(const models::PipelineConfig& config, const VerifyOptions& options);

// Loads the config at `config_path`, runs the loop and writes the best
// round's config to TunedConfigPath(output, config_path) (relative paths
// rebased), with its diff when asked for.
struct VerifiedTune {
  VerifyResult result;
  TunedConfig written;
};
StatusOr<VerifiedTune> VerifyConfigFile(const std::string& config_path, VerifyOptions options,
                                        const std::string& output, bool with_diff);

// `pipetune tune --verify --format json`: rounds, best_round, measured and
// predicted throughput, stop_reason, config_path, diff when asked for.
Json VerifiedTuneToJson(const VerifiedTune& verified);

// `pipetune tune --verify`, for every kind of run: INPUT a config (the
// engine's loop above), or TRACE -- PROGRAM (a program run under its
// recorder: a DataLoader's loop, dataloader_verify.h). The kind's adapter runs its
// loop, writes the best round's knobs and says what it wrote, as JSON
// (`--format json`) and as text.
struct VerifyRequest {
  // A config; or the trace to write, then the program (CLI11 gives what
  // follows -- to the first positional that takes more).
  std::vector<std::string> inputs;
  std::vector<std::string> command;  // the program, after --
  VerifyOptions options;             // seconds, objective, budgets, trace_dir, handoff_ns, progress
  // Plans to run after the first run; unset: the kind's default (3 for a
  // config; 1, and at least 1, for a DataLoader).
  std::optional<int> rounds;
  std::string output;  // where the best round's knobs go; empty: the kind's default
  bool diff = false;
  bool json = false;  // printed as JSON: the program's own stdout goes to stderr
  // The program ran once already, as written, into the trace (Verify runs
  // it to learn its kind): the loop reads that run as its round 0.
  bool first_run_made = false;
};
struct VerifyOutcome {
  Json json;
  std::string text;
};
// Errors: the kind's loop's (a config that does not build, a program that
// fails, no plan within the budgets), and more than one config.
StatusOr<VerifyOutcome> Verify(const VerifyRequest& request);

// One round of a tuning loop as `tune --verify --format json` lists it, for
// every kind: what ran (a config's "changes" in a few words, a DataLoader's
// "settings", null for the script's own), the prediction that chose it, what
// was measured, and the threads ("threads") or workers ("workers") it ran.
struct VerifyRoundRow {
  int round = 0;
  const char* settings_key = "changes";
  Json settings;
  double predicted_throughput = 0;
  double measured_throughput = 0;
  const char* threads_key = "threads";
  int threads = 0;
};

// The part of `tune --verify --format json` every kind shares: "rounds"
// (one object per row, keys in the row's order), "best_round", the best
// round's "measured_throughput" and "predicted_throughput", and
// "stop_reason". A config's adds where its config went, a DataLoader's its
// keyword arguments (DataLoaderVerifyToJson). `best` indexes `rounds`.
Json VerifyLoopToJson(const std::vector<VerifyRoundRow>& rounds, size_t best, const std::string& stop_reason);

// The rounds as a table: round, changes, predicted, measured, measured /
// predicted; a line naming the best.
std::string FormatRoundTable(const VerifyResult& result);

}  // namespace pipetune::workflow

// The CI gate written once for every kind of baseline (a config's,
// config_adapter.cc; a DataLoader's, gate_dataloader.cc, each reached
// through its adapter, adapter.h): one measuring loop (MeasureRunsOf over
// a RunKind), one Check and one Judge (commands.cc), one stage-identity
// comparison (SameStages), one judgement of the knobs (JudgeKnobs) and of
// the runs (JudgeRuns, Conclude). A kind supplies only how its runs are
// made and read and what its knobs are, so that both are measured and
// judged by the same statistics and rules. Private to the workflow.
#pragma once

#include <cmath>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "pipetune/analyzer/diagnosis.h"
#include "pipetune/base/json.h"
#include "pipetune/workflow/baseline.h"
#include "pipetune/workflow/check.h"
#include "run_directory.h"

namespace pipetune::workflow::internal {

// The cost, throughput and machine judgements of check.h on `runs` against
// the baseline's; fills report.stages, throughput and the machine fields.
void JudgeRuns(const Baseline& baseline, const std::vector<RunRecord>& runs, const JudgeOptions& options,
               CheckReport& report);

// The identity every baseline records (IdentityHash, DataLoaderIdentityHash):
// `identity` serialised on one line, FNV-1a with the baselines' basis, as
// 16 hex digits. One function, so that the two kinds cannot drift apart.
std::string HashIdentity(const Json& identity);

// What identifies a stage to the gate; a kind leaves out what is not its
// identity (a DataLoader's stages are known by name: op and fn empty).
struct StageIdentity {
  std::string name, op, fn;
};

// The one identity comparison: Ok when `now` is `before`'s stages in order;
// else kInvalidInput, `other` (which baseline, and that it was not
// compared) followed by what differs, the new stages called `now_name`
// ("the config", "this run"), `count_note` after the two lists when the
// counts differ.
Status SameStages(const std::vector<StageIdentity>& before, const std::vector<StageIdentity>& now,
                  const std::string& other, const std::string& now_name, const std::string& count_note);

// One knob that differs from the baseline. `alone` is the baseline's knobs
// with only this change made, to price it; nullopt when the model does not
// price this knob (a prefetch buffer).
template <typename Knobs>
struct KnobDifference {
  KnobChange change;
  std::optional<Knobs> alone;
};

// The config judgement of check.h, written once for both kinds of run: each
// kind says only what its knobs are (`Knobs`: a config's stages, a
// DataLoader's settings), which differ, and how the model predicts a set of
// them (`predict`; empty when there is no profile to price on). Fills the
// predictions, report.knobs in the order given and config_regressed. A
// change is priced against the baseline's prediction, so a prediction of 0
// (or one not finite) prices nothing.
template <typename Knobs>
void JudgeKnobs(const std::function<double(const Knobs&)>& predict, const Knobs& before, const Knobs& now,
                std::vector<KnobDifference<Knobs>> differences, const JudgeOptions& options,
                CheckReport& report) {
  auto relative = [](double from, double to) -> std::optional<double> {
    if (!(from > 0) || !std::isfinite(from) || !std::isfinite(to)) return std::nullopt;
    return to / from - 1;
  };
  bool priced = static_cast<bool>(predict);
  if (priced) {
    report.predicted_before = predict(before);
    report.predicted_after = predict(now);
    report.predicted_change = relative(report.predicted_before, report.predicted_after).value_or(0);
  }
  for (KnobDifference<Knobs>& d : differences) {
    if (priced && d.alone) d.change.predicted_change = relative(report.predicted_before, predict(*d.alone));
    report.knobs.push_back(std::move(d.change));
  }
  report.config_regressed = priced && report.predicted_change < -options.tolerance;
}

// What the new runs add to a judged report, for either kind: the last
// run's bottleneck and why, a note when they had another number of cores
// allowed than the baseline's (the same machine on other terms), and one
// when they ran on another host.
void ReportRuns(const Baseline& baseline, const MeasuredRuns& measured, CheckReport& report);

// The verdict from what was judged: a regression when a stage, the
// throughput or the knobs regressed; else machine when the machine drifted.
void Conclude(CheckReport& report);

// How one kind of run is measured and checked by the gate. The loop
// (MeasureRunsOf) and the check (Check, check.cc) are written once; a kind
// supplies only how its runs are made and read, and what it compares and
// judges them by.
struct RunKind {
  // The main traces among those given (a DataLoader's workers' traces are
  // read beside their main trace); empty: all of them.
  std::function<std::vector<std::string>(const std::vector<std::string>& traces)> main_traces;
  // Makes `request.runs` traced runs (request.runs >= 1), each trace in `dir`.
  std::function<StatusOr<std::vector<std::string>>(const BaselineRequest& request, const RunDirectory& dir)>
      run;
  // Reads the trace of run `index`: its profile. The first run sets what
  // identifies the pipeline in `measured` (config or dataloader, stages,
  // pipeline, host); a later run of another pipeline than `first_trace`'s is
  // an error naming both.
  std::function<StatusOr<models::Profile>(const std::string& trace, size_t index,
                                          const std::string& first_trace, MeasuredRuns& measured)>
      read;
  // The diagnosis of the last run read (`trace`).
  std::function<StatusOr<analyzer::Diagnosis>(const std::string& trace)> diagnose;

  // The check. `prepare` refuses a request this kind cannot check against
  // `baseline` (bad input, naming what is wrong), and reads what is judged
  // when it is known before any run is made (a config file: its knobs,
  // compared with the baseline's before the runs); nullopt: the first new
  // run says.
  std::function<StatusOr<std::optional<MeasuredRuns>>(const CheckRequest& request, const Baseline& baseline)>
      prepare;
  bool judges_without_runs = false;  // a config's knobs are judged on the baseline's profile alone
};

// The kinds: a config's runs (config_adapter.cc) and a DataLoader's, the
// program under the bootstrap or its traces (gate_dataloader.cc); each
// kind's adapter (adapter.h) hands out its own.
RunKind ConfigRunKind();
RunKind DataLoaderRunKind();
// A DataLoader's part of SameRun and Judge (check.h): its dataset, batch
// size and stage names; its settings priced on the new run's profile.
Status SameDataLoader(const Baseline& baseline, const MeasuredRuns& now, const std::string& baseline_name);
void JudgeDataLoaderKnobs(const Baseline& baseline, const MeasuredRuns& now, const JudgeOptions& options,
                          CheckReport& report);

// Runs request.command `request.runs` times under the Python bootstrap; the
// main traces (gate_dataloader.cc). Every kind a program records makes its
// runs so.
StatusOr<std::vector<std::string>> RunProgram(const BaselineRequest& request, const RunDirectory& dir);

// The runs of `request` (its traces, or `request.runs` new runs made by
// `kind.run` in request.trace_dir or a temporary directory) read by
// `kind.read` into one record each, the first run's profile kept; with
// `diagnose`, the last run's bottleneck and why. `read_by`, when given,
// names the kind that reads them from the first one's trace (a program's
// kind is known only once it ran); else `kind` reads them.
StatusOr<MeasuredRuns> MeasureRunsOf(
    const RunKind& kind, const BaselineRequest& request, bool diagnose,
    const std::function<RunKind(const std::string& first_trace)>& read_by = {});

}  // namespace pipetune::workflow::internal

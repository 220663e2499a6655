// One adapter per kind of run: the engine's config (config_adapter.cc), a
// PyTorch DataLoader (dataloader_adapter.cc), a tf.data pipeline
// (tfdata_adapter.cc). The commands (report, tune,
// the CI gate's baseline and check) take the adapter that recording.cc picks
// and never ask which kind they hold; everything a kind does its own way is
// here:
//   - reading its recording into the one model's profile (Diagnose, and the
//     gate's runs: GateKind);
//   - mapping a solved plan back to the user's knobs and writing them (Tune:
//     a tuned config, a file of keyword arguments), and what it wrote, in
//     the plan's JSON and after its text (TuneResult::written);
//   - its own part of the gate's judgement (JudgeKnobs, Same) and of the
//     baseline file (its settings section);
//   - for a kind a program records (under the Python bootstrap), the file
//     of settings `profile --apply` hands to the program's recorder.
//
// Adding a kind is writing one more adapter and listing it in Adapters()
// (recording.cc); docs/design.md says how. Private to the workflow.
#pragma once

#include <fmt/format.h>

#include <functional>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "gate_judge.h"
#include "pipetune/analyzer/diagnosis.h"
#include "pipetune/base/json.h"
#include "pipetune/base/status.h"
#include "pipetune/workflow/baseline.h"
#include "pipetune/workflow/check.h"
#include "pipetune/workflow/dataloader_verify.h"
#include "pipetune/workflow/engine_from_dataloader.h"
#include "pipetune/workflow/export.h"
#include "pipetune/workflow/profile_program.h"
#include "pipetune/workflow/python_bootstrap.h"
#include "pipetune/workflow/tune.h"
#include "pipetune/workflow/verify.h"

namespace pipetune::workflow::internal {

// `tune --engine`'s refusal of a request that is not one trace of a kind
// with an engine equivalent (engine_from_dataloader.cc).
Status NoEngineEquivalent(const EngineTuneRequest& request);

class RunAdapter {
 public:
  virtual ~RunAdapter() = default;

  // The kind's name, as a baseline file records it ("config", "dataloader").
  virtual const char* kind() const = 0;
  // Whether `trace` is this kind's recording, from its header alone (a trace
  // that cannot be read is no kind's: the reader refuses it by name later).
  virtual bool Recognizes(const std::string& trace) const = 0;

  // `pipetune report`: the diagnosis of the traces as given.
  virtual StatusOr<analyzer::Diagnosis> Diagnose(const std::vector<std::string>& traces,
                                                 analyzer::DiagnoseOptions options) const = 0;

  // `pipetune tune`: one profile, the plan under the request's budgets, the
  // user's knobs set from it and written; `written` and `written_text` say
  // what went where.
  virtual StatusOr<TuneResult> Tune(const TuneRequest& request) const = 0;

  // `pipetune tune --verify`: the kind's closed loop, the best round's knobs
  // written, and what it printed (verify.h).
  virtual StatusOr<VerifyOutcome> Verify(const VerifyRequest& request) const = 0;

  // `pipetune export`: the traces as one Chrome/Perfetto timeline.
  virtual StatusOr<ExportResult> Export(const std::vector<std::string>& traces, std::ostream& out,
                                        const tracer::ChromeExportOptions& options) const = 0;

  // The CI gate: how this kind's runs are made, read and diagnosed.
  virtual RunKind GateKind() const = 0;
  // The knobs of `now` against the baseline's: report.knobs, the
  // predictions and config_regressed (JudgeKnobs in gate_judge.h).
  virtual void JudgeKnobs(const Baseline& baseline, const MeasuredRuns& now, const JudgeOptions& options,
                          CheckReport& report) const = 0;
  // Ok when `now` is of the pipeline `baseline` was recorded from; else
  // kInvalidInput saying what differs.
  virtual Status Same(const Baseline& baseline, const MeasuredRuns& now,
                      const std::string& baseline_name) const = 0;
  // The baseline file's section of this kind's settings: added to `doc` when
  // written, read back into `baseline` (errors name the file and the key).
  virtual void WriteBaselineSettings(const Baseline& baseline, Json& doc) const = 0;
  virtual Status ReadBaselineSettings(const Json& doc, const std::string& source_name,
                                      Baseline& baseline) const = 0;

  // `pipetune profile --apply FILE`: whether FILE is this kind's settings
  // (the file its Tune writes), and the file checked and named to the
  // program's recorder (errors name the file and the key). A kind that no
  // program records recognizes none.
  virtual bool RecognizesSettings(const std::string&) const { return false; }
  virtual StatusOr<ProgramSettings> SettingsForProgram(const std::string& file) const {
    return InvalidInput(fmt::format("{}: a {} run takes no --apply file", file, kind()));
  }

  // `pipetune profile -- COMMAND`: the process of the program's job that
  // wrote `trace`, one of the job's main traces (JobTracePaths), and how it
  // ended; nullopt for a kind whose recorder writes no trace per process.
  virtual std::optional<ProfiledProcess> RecordedProcess(const std::string&) const { return std::nullopt; }

  // `pipetune tune --engine`: the engine's equivalent of this kind's
  // pipeline, calibrated on the engine and tuned; a kind that has none
  // refuses the request by name.
  virtual StatusOr<EngineTuneResult> TuneOnEngine(const EngineTuneRequest& request) const {
    return NoEngineEquivalent(request);
  }
};

// The engine's equivalent of a DataLoader's trace, calibrated and tuned
// (engine_from_dataloader.cc; the DataLoader adapter's TuneOnEngine).
StatusOr<EngineTuneResult> TuneDataLoaderOnEngine(const EngineTuneRequest& request);

// Every kind, in the order they are tried on a recording; the last is the
// engine's config, which takes whatever no other kind recognizes.
const std::vector<const RunAdapter*>& Adapters();
// The adapter of a baseline's kind; null when no kind has that name.
const RunAdapter* AdapterNamed(const std::string& kind);
// The adapter of a program run under the Python bootstrap (`-- python3
// train.py`), from its first run's trace: the kind that recognizes it (a
// DataLoader's, a tf.data pipeline's); a DataLoader's when none does (empty:
// not run yet), whose reader then says what the trace lacks. Before the
// first run any program kind makes the runs: each runs the program under the
// bootstrap alike.
const RunAdapter& ProgramAdapter(const std::string& first_run_trace);
// The adapter whose settings file `apply` is (`profile --apply`): the kind
// that recognizes it, else a DataLoader's (its reader names what is wrong).
const RunAdapter& SettingsAdapterFor(const std::string& apply);

// The adapter of `baseline`'s kind (a baseline read back names a known one).
const RunAdapter& AdapterOf(const Baseline& baseline);
// The adapter of the runs the gate is given (the one place the gate asks):
// the baseline's kind (null: none yet) when it is not the engine's config,
// else a program's kind when a program is given (ProgramAdapter of
// `first_run`, the first run's trace once made), else the traces'
// (OpenRecording); a config to run is the engine's.
const RunAdapter& GateAdapterFor(const BaselineRequest& request, const Baseline* baseline = nullptr,
                                 const std::string& first_run = "");
// Whether a tuning loop's input is a program (after --, or after the trace
// to write), whose kind is its first run's; and the adapter of the loop:
// ProgramAdapter(first_run) for a program (`first_run` made by the caller),
// else the engine's config.
bool VerifiesProgram(const VerifyRequest& request);
const RunAdapter& VerifyAdapterFor(const VerifyRequest& request, const std::string& first_run = "");

// A program's tuning loop as both program kinds run it: the trace to write,
// the program (CLI11 may give part of it to the inputs), the budgets, and
// at least one round.
DataLoaderVerifyOptions ProgramVerifyOptions(const VerifyRequest& request);

// One trace exported alone (tracer::ExportChrome), whatever its kind; a
// DataLoader run's traces gathered on one timeline (dataloader_export.cc).
StatusOr<ExportResult> ExportOneTrace(const std::string& trace_path, std::ostream& out,
                                      const tracer::ChromeExportOptions& options);
StatusOr<ExportResult> ExportDataLoaderRun(const std::vector<std::string>& trace_paths, std::ostream& out,
                                           const tracer::ChromeExportOptions& options);

const RunAdapter& ConfigAdapter();
const RunAdapter& DataLoaderAdapter();
const RunAdapter& TfDataAdapter();

}  // namespace pipetune::workflow::internal

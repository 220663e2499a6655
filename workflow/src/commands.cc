// The commands that take a recording, each written once over the adapter
// of its kind (adapter.h, picked in recording.cc): tune, tune --verify,
// export, the CI gate's baseline and check, and the file `profile --apply`
// hands a program. Kept apart from the helpers the
// adapters call (tune.cc, verify.cc, check.cc, baseline.cc, export.cc), so
// that those never reach up to the adapters.
#include <fmt/format.h>

#include <optional>
#include <utility>

#include "adapter.h"
#include "gate_judge.h"
#include "handoff_probe.h"
#include "pipetune/workflow/baseline.h"
#include "pipetune/workflow/check.h"
#include "pipetune/workflow/dataloader_verify.h"
#include "pipetune/workflow/export.h"
#include "pipetune/workflow/python_bootstrap.h"
#include "pipetune/workflow/recording.h"
#include "pipetune/workflow/tune.h"
#include "pipetune/workflow/verify.h"

namespace pipetune::workflow {

StatusOr<TuneResult> Tune(const TuneRequest& request) {
  PIPETUNE_RETURN_IF_ERROR(ValidateGivenHandoff(request.handoff_ns));
  return OpenRecording(request.traces).adapter->Tune(request);
}

StatusOr<VerifyOutcome> Verify(const VerifyRequest& request) {
  if (!internal::VerifiesProgram(request)) return internal::VerifyAdapterFor(request).Verify(request);
  // A program's kind is its first run's: that run, the script as written,
  // is made here and is the loop's round 0.
  DataLoaderVerifyOptions options = internal::ProgramVerifyOptions(request);
  PIPETUNE_RETURN_IF_ERROR(RunProgramRound(options, options.trace, 0, nullptr).status());
  VerifyRequest ran = request;
  ran.first_run_made = true;
  return internal::VerifyAdapterFor(ran, options.trace).Verify(ran);
}

StatusOr<PythonEnvironment> PythonBootstrapEnvironment(const std::string& apply_path) {
  if (apply_path.empty()) return BootstrapEnvironment(std::nullopt);
  // Without a bootstrap nothing could take the file: said before the file.
  PIPETUNE_RETURN_IF_ERROR(FindPythonBootstrap().status().WithContext("--apply"));
  PIPETUNE_ASSIGN_OR_RETURN(ProgramSettings settings,
                            internal::SettingsAdapterFor(apply_path).SettingsForProgram(apply_path));
  return BootstrapEnvironment(settings);
}

StatusOr<ExportResult> ExportTimeline(const std::vector<std::string>& trace_paths, std::ostream& out,
                                      const tracer::ChromeExportOptions& options) {
  if (trace_paths.empty()) return InvalidInput("no trace to export");
  return OpenRecording(trace_paths).adapter->Export(trace_paths, out, options);
}

namespace {

// The runs of a gate request with no baseline, and the adapter that read
// them: a program's is picked by its first run's trace, once made.
StatusOr<MeasuredRuns> MeasureNewRuns(const BaselineRequest& request, bool diagnose,
                                      const internal::RunAdapter** read_by) {
  *read_by = &internal::GateAdapterFor(request);
  auto pick = [&](const std::string& first_trace) {
    *read_by = &internal::GateAdapterFor(request, nullptr, first_trace);
    return (*read_by)->GateKind();
  };
  return internal::MeasureRunsOf((*read_by)->GateKind(), request, diagnose, pick);
}

}  // namespace

StatusOr<MeasuredRuns> MeasureRuns(const BaselineRequest& request, bool diagnose) {
  const internal::RunAdapter* adapter = nullptr;
  return MeasureNewRuns(request, diagnose, &adapter);
}

StatusOr<Baseline> RecordBaseline(const BaselineRequest& request) {
  const internal::RunAdapter* adapter = nullptr;
  PIPETUNE_ASSIGN_OR_RETURN(MeasuredRuns measured, MeasureNewRuns(request, /*diagnose=*/false, &adapter));
  Baseline baseline;
  baseline.kind = adapter->kind();
  baseline.dataloader = std::move(measured.dataloader);
  baseline.command = request.command;
  baseline.pipeline = std::move(measured.pipeline);
  baseline.identity = std::move(measured.identity);
  baseline.stages = std::move(measured.stages);
  baseline.model = std::move(measured.first_profile);
  baseline.host = measured.host;
  baseline.runs = std::move(measured.runs);
  return baseline;
}

CheckReport Judge(const Baseline& baseline, const MeasuredRuns& now, const JudgeOptions& options) {
  CheckReport report;
  report.pipeline = baseline.pipeline;
  report.tolerance = options.tolerance;
  internal::AdapterOf(baseline).JudgeKnobs(baseline, now, options, report);
  if (!now.runs.empty() && !baseline.runs.empty()) internal::JudgeRuns(baseline, now.runs, options, report);
  internal::Conclude(report);
  return report;
}

Status SameRun(const Baseline& baseline, const MeasuredRuns& now, const std::string& baseline_name) {
  return internal::AdapterOf(baseline).Same(baseline, now, baseline_name);
}

StatusOr<CheckReport> Check(const CheckRequest& request) {
  if (request.judge.tolerance < 0 || request.judge.tolerance >= 1)
    return InvalidInput(
        fmt::format("--tolerance: expected a percentage in [0, 100), got {}", request.judge.tolerance * 100));
  PIPETUNE_ASSIGN_OR_RETURN(Baseline baseline, LoadBaseline(request.baseline_path));
  BaselineRequest runs{request.config_path, request.traces, request.runs, request.seconds, "",
                       request.command};
  const internal::RunKind kind = internal::GateAdapterFor(runs, &baseline).GateKind();
  // What is judged when known before any run (a config file): compared
  // first, so that another pipeline is refused before time is spent on runs.
  PIPETUNE_ASSIGN_OR_RETURN(std::optional<MeasuredRuns> prepared, kind.prepare(request, baseline));
  if (prepared) PIPETUNE_RETURN_IF_ERROR(SameRun(baseline, *prepared, request.baseline_path));
  std::optional<MeasuredRuns> measured;
  if (!request.traces.empty() || request.runs > 0 || !kind.judges_without_runs) {
    PIPETUNE_ASSIGN_OR_RETURN(measured, internal::MeasureRunsOf(kind, runs, /*diagnose=*/true));
    if (!prepared) PIPETUNE_RETURN_IF_ERROR(SameRun(baseline, *measured, request.baseline_path));
  }
  // The knobs judged are the prepared ones when there are (the config the
  // check names), with the runs measured.
  MeasuredRuns now = prepared ? std::move(*prepared) : measured.value_or(MeasuredRuns{});
  if (prepared && measured) now.runs = measured->runs;
  CheckReport report = Judge(baseline, now, request.judge);
  if (measured) {
    internal::ReportRuns(baseline, *measured, report);
  } else {
    report.notes.push_back("config only: no runs (--runs 0)");
  }
  return report;
}

}  // namespace pipetune::workflow

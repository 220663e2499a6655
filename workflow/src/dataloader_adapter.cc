// A PyTorch DataLoader as a kind of run (adapter.h): the Python
// bootstrap's main trace and its workers' read into the one model's profile
// (analyzer::DataLoaderModelProfile), a plan mapped back to the DataLoader's
// keyword arguments (dataloader_kwargs.h), and its settings judged by the gate and
// kept in its baseline's "dataloader" section.
#include <fmt/format.h>

#include <algorithm>

#include "adapter.h"
#include "baseline_reader.h"
#include "pipetune/analyzer/dataloader_job.h"
#include "pipetune/analyzer/dataloader_model.h"
#include "pipetune/analyzer/dataloader_trace.h"
#include "pipetune/analyzer/what_if.h"
#include "pipetune/tracer/reader.h"
#include "pipetune/workflow/dataloader_format.h"
#include "pipetune/workflow/dataloader_kwargs.h"
#include "pipetune/workflow/dataloader_plan.h"
#include "pipetune/workflow/dataloader_verify.h"

namespace pipetune::workflow {
namespace {

// The "dataloader" object of a DataLoader's baseline.
StatusOr<DataLoaderGateSettings> ParseDataLoaderSettings(const Json& doc, const internal::Reader& r) {
  PIPETUNE_ASSIGN_OR_RETURN(const Json* d, r.Field(doc, "dataloader", "dataloader", Json::value_t::object));
  DataLoaderGateSettings s;
  auto integer = [&](const char* key) -> StatusOr<int> {
    PIPETUNE_ASSIGN_OR_RETURN(double v, r.Number(*d, key, std::string("dataloader.") + key));
    return static_cast<int>(v);
  };
  auto flag = [&](const char* key) -> StatusOr<bool> {
    PIPETUNE_ASSIGN_OR_RETURN(const Json* v,
                              r.Field(*d, key, std::string("dataloader.") + key, Json::value_t::boolean));
    return v->get<bool>();
  };
  PIPETUNE_ASSIGN_OR_RETURN(s.batch_size, integer("batch_size"));
  PIPETUNE_ASSIGN_OR_RETURN(s.dataset, r.String(*d, "dataset", "dataloader.dataset"));
  // The knobs the DataLoader's model profile names, each of its type, in
  // the profile's order (models::KnobValues'), which the object keeps.
  for (const char* key : {analyzer::kNumWorkersKnob, analyzer::kPrefetchFactorKnob}) {
    PIPETUNE_ASSIGN_OR_RETURN(s.knobs[key], integer(key));
  }
  PIPETUNE_ASSIGN_OR_RETURN(s.knobs[analyzer::kPersistentWorkersKnob],
                            flag(analyzer::kPersistentWorkersKnob));
  // Named only for a map-style dataset's profile, and absent from baselines
  // written before fetch threads existed.
  if (d->contains(analyzer::kFetchThreadsKnob)) {
    PIPETUNE_ASSIGN_OR_RETURN(s.knobs[analyzer::kFetchThreadsKnob], integer(analyzer::kFetchThreadsKnob));
  }
  PIPETUNE_ASSIGN_OR_RETURN(s.knobs[analyzer::kPinMemoryKnob], flag(analyzer::kPinMemoryKnob));
  return s;
}

class DataLoaderRunAdapter final : public internal::RunAdapter {
 public:
  const char* kind() const override { return kDataLoaderBaseline; }
  // The bootstrap starts its session with the DataLoader's record as the
  // config, so the header alone tells.
  bool Recognizes(const std::string& trace) const override { return analyzer::IsDataLoaderTraceFile(trace); }

  // A DataLoader run is its main traces (one per process that consumed a
  // DataLoader: T and the T.main.<pid> files beside it) and their workers'
  // traces; several runs given are the nodes of one job (docs/distributed.md).
  StatusOr<analyzer::Diagnosis> Diagnose(const std::vector<std::string>& traces,
                                         analyzer::DiagnoseOptions options) const override {
    PIPETUNE_ASSIGN_OR_RETURN(analyzer::DataLoaderJob job, analyzer::ReadDataLoaderJob(traces));
    return analyzer::DiagnoseDataLoaderJob(job, options);
  }

  // One plan for its job, the keyword arguments written.
  StatusOr<TuneResult> Tune(const TuneRequest& request) const override {
    if (request.traces.size() > 1) {
      return InvalidInput(request.traces[0] + ": a DataLoader's trace is tuned alone");
    }
    PIPETUNE_ASSIGN_OR_RETURN(
        DataLoaderTuneResult tuned,
        TuneDataLoaderTrace({request.traces[0], request.budgets, request.objective, request.output}));
    TuneResult result;
    result.plan = tuned.plan;
    result.warnings = tuned.warnings;
    result.written["output"] = tuned.output;
    result.written["dataloader_kwargs"] = tuned.dataloader_kwargs;
    result.written["code_change"] = tuned.code_change;
    result.written_text =
        fmt::format("DataLoader keyword arguments: {}\ncode change: {}\n", tuned.output, tuned.code_change);
    result.dataloader = std::move(tuned);
    return result;
  }

  StatusOr<VerifyOutcome> Verify(const VerifyRequest& request) const override {
    PIPETUNE_ASSIGN_OR_RETURN(DataLoaderVerifyResult result,
                              VerifyDataLoader(internal::ProgramVerifyOptions(request)));
    return VerifyOutcome{DataLoaderVerifyToJson(result), FormatDataLoaderVerify(result)};
  }

  StatusOr<ExportResult> Export(const std::vector<std::string>& traces, std::ostream& out,
                                const tracer::ChromeExportOptions& options) const override {
    return internal::ExportDataLoaderRun(traces, out, options);
  }

  internal::RunKind GateKind() const override { return internal::DataLoaderRunKind(); }

  void JudgeKnobs(const Baseline& baseline, const MeasuredRuns& now, const JudgeOptions& options,
                  CheckReport& report) const override {
    internal::JudgeDataLoaderKnobs(baseline, now, options, report);
  }

  Status Same(const Baseline& baseline, const MeasuredRuns& now,
              const std::string& baseline_name) const override {
    return internal::SameDataLoader(baseline, now, baseline_name);
  }

  void WriteBaselineSettings(const Baseline& baseline, Json& doc) const override {
    if (const std::optional<DataLoaderGateSettings>& d = baseline.dataloader) {
      Json section{{"batch_size", d->batch_size}, {"dataset", d->dataset}};
      for (const auto& [knob, value] : d->knobs.items()) section[knob] = value;
      doc["dataloader"] = std::move(section);
    }
  }

  Status ReadBaselineSettings(const Json& doc, const std::string& source_name,
                              Baseline& baseline) const override {
    PIPETUNE_ASSIGN_OR_RETURN(baseline.dataloader,
                              ParseDataLoaderSettings(doc, internal::Reader{source_name}));
    return Status::Ok();
  }

  // Any JSON object may be keyword arguments: the last kind asked
  // (SettingsAdapterFor), so it recognizes none itself.
  StatusOr<ProgramSettings> SettingsForProgram(const std::string& file) const override {
    return DataLoaderSettingsFile(file);
  }

  // The recorder writes one main trace per process that consumed a
  // DataLoader (a rank of a job).
  std::optional<ProfiledProcess> RecordedProcess(const std::string& trace) const override {
    StatusOr<tracer::Trace> main = tracer::LoadTrace(trace);
    if (!main.ok()) return std::nullopt;
    analyzer::DataLoaderProfile p = analyzer::DescribeDataLoaderProcess(*main);
    ProfiledProcess process;
    process.trace = trace;
    process.rank = p.rank;
    process.pid = p.pid;
    process.exit_status = p.exit_status;
    process.exception = p.exit_exception;
    process.ended = analyzer::HowItEnded(p);
    return process;
  }

  StatusOr<EngineTuneResult> TuneOnEngine(const EngineTuneRequest& request) const override {
    return internal::TuneDataLoaderOnEngine(request);
  }
};

}  // namespace

namespace internal {

DataLoaderVerifyOptions ProgramVerifyOptions(const VerifyRequest& request) {
  DataLoaderVerifyOptions options;
  if (!request.inputs.empty()) options.trace = request.inputs[0];
  options.command = request.command;
  if (request.inputs.size() > 1)
    options.command.insert(options.command.begin(), request.inputs.begin() + 1, request.inputs.end());
  options.budgets = request.options.budgets;
  options.output = request.output;
  options.rounds = std::max(1, request.rounds.value_or(1));
  options.objective = request.options.objective;
  options.program_stdout_to_stderr = request.json;
  options.first_round_ran = request.first_run_made;
  return options;
}

const RunAdapter& DataLoaderAdapter() {
  static const DataLoaderRunAdapter adapter;
  return adapter;
}

}  // namespace internal
}  // namespace pipetune::workflow

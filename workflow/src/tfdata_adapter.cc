// A tf.data pipeline as a kind of run (adapter.h, docs/tfdata.md). Its
// trace is a config's run whose config is the script's ops, named by their
// lines (tfdata.h), so it is read, reported, exported and judged by the
// gate as the engine's config is: this adapter hands those to the config's.
// What is its own: tune writes a plan keyed by call site and the code change
// (tfdata_verify.h) where a config's writes a tuned config; its runs, for
// the gate and the tuning loop, are the program's under the Python
// bootstrap; and `profile --apply` takes its plan.
#include <fmt/format.h>

#include <optional>

#include "adapter.h"
#include "pipetune/workflow/tfdata.h"
#include "pipetune/workflow/tfdata_verify.h"

namespace pipetune::workflow {
namespace {

// The gate's runs of a tf.data script: the program run under the bootstrap,
// each trace read and diagnosed as a config's run.
internal::RunKind TfDataRunKind() {
  internal::RunKind kind = internal::ConfigRunKind();
  kind.run = internal::RunProgram;
  kind.prepare = [](const CheckRequest& request, const Baseline&) -> StatusOr<std::optional<MeasuredRuns>> {
    if (!request.config_path.empty())
      return InvalidInput(
          fmt::format("{}: a tf.data script's baseline: check it with `-- python3 SCRIPT` or its traces, not "
                      "the config {}",
                      request.baseline_path, request.config_path));
    if (request.traces.empty() && request.command.empty())
      return InvalidInput("a tf.data script's baseline needs the program (-- python3 SCRIPT) or its traces");
    return std::optional<MeasuredRuns>();  // the runs say what is judged
  };
  // The script's ops are known only from a run.
  kind.judges_without_runs = false;
  return kind;
}

class TfDataRunAdapter final : public internal::RunAdapter {
 public:
  const char* kind() const override { return kTfDataBaseline; }
  // The bootstrap starts its session with the "tfdata" record in the
  // config, so the header alone tells.
  bool Recognizes(const std::string& trace) const override { return IsTfDataTraceFile(trace); }

  StatusOr<analyzer::Diagnosis> Diagnose(const std::vector<std::string>& traces,
                                         analyzer::DiagnoseOptions options) const override {
    return Config().Diagnose(traces, options);
  }

  StatusOr<TuneResult> Tune(const TuneRequest& request) const override { return TuneTfDataTrace(request); }

  StatusOr<VerifyOutcome> Verify(const VerifyRequest& request) const override {
    PIPETUNE_ASSIGN_OR_RETURN(TfDataVerifyResult result,
                              VerifyTfData(internal::ProgramVerifyOptions(request)));
    return VerifyOutcome{TfDataVerifyToJson(result), FormatTfDataVerify(result)};
  }

  StatusOr<ExportResult> Export(const std::vector<std::string>& traces, std::ostream& out,
                                const tracer::ChromeExportOptions& options) const override {
    return Config().Export(traces, out, options);
  }

  internal::RunKind GateKind() const override { return TfDataRunKind(); }

  // The script's ops are a config's stages: compared and priced as those.
  void JudgeKnobs(const Baseline& baseline, const MeasuredRuns& now, const JudgeOptions& options,
                  CheckReport& report) const override {
    Config().JudgeKnobs(baseline, now, options, report);
  }
  Status Same(const Baseline& baseline, const MeasuredRuns& now,
              const std::string& baseline_name) const override {
    return Config().Same(baseline, now, baseline_name);
  }
  void WriteBaselineSettings(const Baseline& baseline, Json& doc) const override {
    Config().WriteBaselineSettings(baseline, doc);
  }
  Status ReadBaselineSettings(const Json& doc, const std::string& source_name,
                              Baseline& baseline) const override {
    return Config().ReadBaselineSettings(doc, source_name, baseline);
  }

  // Its plan file says so by its "tfdata_plan" key.
  bool RecognizesSettings(const std::string& file) const override { return IsTfDataPlanFile(file); }
  StatusOr<ProgramSettings> SettingsForProgram(const std::string& file) const override {
    return TfDataPlanSettings(file);
  }

 private:
  static const internal::RunAdapter& Config() { return internal::ConfigAdapter(); }
};

}  // namespace

namespace internal {

const RunAdapter& TfDataAdapter() {
  static const TfDataRunAdapter adapter;
  return adapter;
}

}  // namespace internal
}  // namespace pipetune::workflow

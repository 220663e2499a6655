// The engine's config as a kind of run (adapter.h): its traces read into
// one profile, the plan applied to the config (and to the C++ source that
// builds it, when named), its knobs judged by the gate on the baseline's
// profile.
#include <fmt/format.h>

#include <algorithm>
#include <functional>
#include <map>
#include <memory>
#include <optional>

#include "adapter.h"
#include "decode_probe.h"
#include "handoff_probe.h"
#include "pipetune/analyzer/diagnosis.h"
#include "pipetune/models/rate_model.h"
#include "pipetune/tracer/reader.h"
#include "pipetune/tuner/fusion.h"
#include "pipetune/tuner/plan_report.h"
#include "pipetune/tuner/rewrite.h"
#include "pipetune/workflow/run.h"
#include "pipetune/workflow/source_rewrite.h"

namespace pipetune::workflow {
namespace {

bool IsKnobOp(const std::string& op) { return op == "prefetch" || op == "cache"; }

std::vector<internal::StageIdentity> IdentitiesOf(const std::vector<StageKnobs>& stages) {
  std::vector<internal::StageIdentity> ids;
  for (const StageKnobs& s : stages) {
    if (!IsKnobOp(s.op)) ids.push_back({s.name, s.op, s.fn});
  }
  return ids;
}

std::string Spell(const std::optional<int64_t>& v) { return v ? std::to_string(*v) : "none"; }

// The knobs of `config` as the model's configuration over the baseline's
// profile; the stages are matched by name.
models::Configuration ConfigurationFor(const models::Profile& profile, const std::vector<StageKnobs>& knobs) {
  models::Configuration conf = models::ObservedConfiguration(profile);
  conf.cache_after.reset();
  for (size_t k = 0; k < knobs.size(); ++k) {
    std::optional<size_t> index = profile.FindStage(knobs[k].name);
    if (index && profile.stages[*index].parallel)
      conf.parallelism[*index] = std::max(1, knobs[k].parallelism);
    if (knobs[k].op == "cache" && k > 0) {
      // A cache after the nearest earlier stage the profile knows.
      for (size_t j = k; j-- > 0;) {
        if (std::optional<size_t> before = profile.FindStage(knobs[j].name)) {
          conf.cache_after = *before;
          break;
        }
      }
    }
  }
  return conf;
}

double PredictFor(const models::Profile& profile, const std::vector<StageKnobs>& knobs) {
  return models::Predict(profile, ConfigurationFor(profile, knobs)).throughput;
}

// The knobs that differ between the baseline's stages and `now`'s, each
// with the baseline's stages with only that change made (to price it).
std::vector<internal::KnobDifference<std::vector<StageKnobs>>> KnobDifferences(
    const std::vector<StageKnobs>& before, const std::vector<StageKnobs>& now) {
  std::vector<internal::KnobDifference<std::vector<StageKnobs>>> differences;
  std::map<std::string, size_t> now_index;
  for (size_t i = 0; i < now.size(); ++i) now_index[now[i].name] = i;
  std::map<std::string, size_t> before_index;
  for (size_t i = 0; i < before.size(); ++i) before_index[before[i].name] = i;

  for (size_t i = 0; i < before.size(); ++i) {
    const StageKnobs& b = before[i];
    auto found = now_index.find(b.name);
    if (found == now_index.end()) {  // a prefetch or cache stage removed
      std::optional<std::vector<StageKnobs>> changed;
      if (b.op == "cache") {
        changed = before;
        changed->erase(changed->begin() + static_cast<std::ptrdiff_t>(i));
      }
      differences.push_back(
          {{b.name, b.op == "cache" ? "cache" : "buffer",
            b.op == "cache" ? b.location.value_or("memory") : Spell(b.buffer), "none", std::nullopt},
           changed});
      continue;
    }
    const StageKnobs& n = now[found->second];
    if (b.parallelism != n.parallelism) {
      std::vector<StageKnobs> changed = before;
      changed[i].parallelism = n.parallelism;
      differences.push_back({{b.name, "parallelism", std::to_string(b.parallelism),
                              std::to_string(n.parallelism), std::nullopt},
                             changed});
    }
    if (b.buffer != n.buffer)
      differences.push_back(
          {{b.name, "buffer", Spell(b.buffer), Spell(n.buffer), std::nullopt}, std::nullopt});
    if (b.location != n.location)
      differences.push_back(
          {{b.name, "cache", b.location.value_or("none"), n.location.value_or("none"), std::nullopt},
           std::nullopt});
  }
  for (size_t i = 0; i < now.size(); ++i) {
    const StageKnobs& n = now[i];
    if (before_index.count(n.name)) continue;
    std::optional<std::vector<StageKnobs>> changed;
    if (n.op == "cache") {
      changed = before;
      // Insert it after the stage it follows in the new config.
      size_t at = 0;
      for (size_t j = i; j-- > 0;) {
        auto known = before_index.find(now[j].name);
        if (known != before_index.end()) {
          at = known->second + 1;
          break;
        }
      }
      changed->insert(changed->begin() + static_cast<std::ptrdiff_t>(at), n);
    }
    differences.push_back({{n.name, n.op == "cache" ? "cache" : "buffer", "none",
                            n.op == "cache" ? n.location.value_or("memory") : Spell(n.buffer), std::nullopt},
                           changed});
  }
  return differences;
}

// A config's knobs priced on the baseline's profile (the config's stages
// are the baseline's: SameRun has compared them).
void JudgeConfig(const Baseline& baseline, const std::vector<StageKnobs>& now, const JudgeOptions& options,
                 CheckReport& report) {
  std::function<double(const std::vector<StageKnobs>&)> predict;
  if (!baseline.model.stages.empty())
    predict = [&](const std::vector<StageKnobs>& knobs) { return PredictFor(baseline.model, knobs); };
  internal::JudgeKnobs(predict, baseline.stages, now, KnobDifferences(baseline.stages, now), options, report);
}

// A config's run (or a program's, with no config): the plan, the tuned
// config written.
StatusOr<TuneResult> TuneConfigTrace(const TuneRequest& request) {
  PIPETUNE_ASSIGN_OR_RETURN(SolvedTrace solved, SolveTrace(request, request.graph_rewrites));
  const TracedRun& traced = solved.traced;
  TuneResult result;
  result.plan = std::move(solved.plan);
  const std::optional<models::PipelineConfig>& config = traced.input.config;
  if (!config) {
    if (!request.output.empty()) {
      return InvalidInput(fmt::format(
          "{} holds no pipeline config (a program traced with `pipetune profile`): there is nothing to "
          "rewrite; drop -o to see the plan",
          request.traces[0]));
    }
    return result;
  }
  PIPETUNE_ASSIGN_OR_RETURN(models::PipelineConfig tuned, tuner::ApplyPlan(*config, result.plan));
  std::string output = TunedConfigPath(request.output, traced.config_path, config->name);
  std::string original_dir = traced.config_path.empty() ? std::string() : DirectoryOf(traced.config_path);
  PIPETUNE_ASSIGN_OR_RETURN(TunedConfig written,
                            WriteTunedConfig(*config, std::move(tuned), original_dir,
                                             config->name + ".json (as traced)", output, request.diff));
  result.config = std::move(written);
  return result;
}

// Where a config's tune wrote the tuned config, as the plan's JSON ends
// (what the C++ source rewrite reads too).
Json WrittenJson(const TuneResult& result) {
  Json written = Json::object();
  written["config_path"] = result.config ? Json(result.config->path) : Json(nullptr);
  if (result.config && result.config->diff) written["diff"] = *result.config->diff;
  return written;
}

// The same as the text after the plan's, with the source's rewrite.
std::string WrittenText(const TuneRequest& request, const TuneResult& result) {
  std::string text;
  if (!result.config) {
    if (!result.source) text += "\nthe trace holds no pipeline config: nothing to rewrite\n";
  } else {
    text += "\n";
    text += FormatDiff(*result.config);
    text += fmt::format("tuned config: {}\n", result.config->path);
  }
  if (result.source) text += fmt::format("source {}:\n{}", request.source, result.source->output);
  return text;
}

class ConfigRunAdapter final : public internal::RunAdapter {
 public:
  const char* kind() const override { return kConfigBaseline; }
  // The default kind: it takes every recording no other kind claims.
  bool Recognizes(const std::string&) const override { return false; }

  StatusOr<analyzer::Diagnosis> Diagnose(const std::vector<std::string>& traces,
                                         analyzer::DiagnoseOptions options) const override {
    options.measure_jpeg = MeasureDecodeCropHost;
    return analyzer::DiagnoseTraces(traces, options);
  }

  StatusOr<TuneResult> Tune(const TuneRequest& request) const override {
    PIPETUNE_ASSIGN_OR_RETURN(TuneResult result, TuneConfigTrace(request));
    result.written = WrittenJson(result);
    if (!request.source.empty()) {
      PIPETUNE_ASSIGN_OR_RETURN(SourceRewriteResult rewritten,
                                RewriteSource({.source = request.source,
                                               .plan = TuneResultToJson(result),
                                               .build_dir = request.source_build_dir}));
      result.source = std::move(rewritten);
    }
    result.written_text = WrittenText(request, result);
    return result;
  }

  StatusOr<VerifyOutcome> Verify(const VerifyRequest& request) const override {
    if (request.inputs.size() != 1) return InvalidInput("--verify takes one pipeline config");
    VerifyOptions options = request.options;
    options.rounds = request.rounds.value_or(3);
    PIPETUNE_ASSIGN_OR_RETURN(VerifiedTune verified,
                              VerifyConfigFile(request.inputs[0], options, request.output, request.diff));
    VerifyOutcome outcome;
    outcome.json = VerifiedTuneToJson(verified);
    const VerifyResult& result = verified.result;
    const Round& last = result.rounds.back();
    if (last.has_plan) outcome.text += tuner::FormatPlanText(last.plan) + "\n";
    outcome.text += FormatRoundTable(result);
    outcome.text += FormatDiff(verified.written);
    outcome.text +=
        fmt::format("tuned config (round {}): {}\n", result.rounds[result.best].index, verified.written.path);
    return outcome;
  }

  // One trace, alone; several are a DataLoader job's nodes, which this is not.
  StatusOr<ExportResult> Export(const std::vector<std::string>& traces, std::ostream& out,
                                const tracer::ChromeExportOptions& options) const override {
    if (traces.size() == 1) return internal::ExportOneTrace(traces[0], out, options);
    PIPETUNE_RETURN_IF_ERROR(tracer::ReadTraceHeader(traces[0]).status());  // missing, not a trace: say so
    return InvalidInput(fmt::format(
        "{} is not a DataLoader's main trace: export takes one trace, or the traces of one job's nodes (each "
        "node's `pipetune profile --trace T`)",
        traces[0]));
  }

  internal::RunKind GateKind() const override { return internal::ConfigRunKind(); }

  // A config's knobs priced on the baseline's profile; changed args are the
  // same pipeline, noted.
  void JudgeKnobs(const Baseline& baseline, const MeasuredRuns& now, const JudgeOptions& options,
                  CheckReport& report) const override {
    std::string identity = IdentityHash(now.config);
    if (identity != baseline.identity)
      report.notes.push_back(fmt::format(
          "the stages' args changed since the baseline (identity {} -> {}): the same pipeline, costs "
          "compared",
          baseline.identity, identity));
    JudgeConfig(baseline, KnobsOf(now.config), options, report);
  }

  Status Same(const Baseline& baseline, const MeasuredRuns& now,
              const std::string& baseline_name) const override {
    return internal::SameStages(IdentitiesOf(baseline.stages), IdentitiesOf(KnobsOf(now.config)),
                                fmt::format("{}: a baseline of another pipeline ({}), not compared: ",
                                            baseline_name, baseline.pipeline),
                                "the config", " (prefetch and cache aside)");
  }

  // A config's baseline holds no settings beyond its stages.
  void WriteBaselineSettings(const Baseline&, Json&) const override {}
  Status ReadBaselineSettings(const Json&, const std::string&, Baseline&) const override {
    return Status::Ok();
  }
};

}  // namespace

namespace internal {

RunKind ConfigRunKind() {
  RunKind config;
  config.run = [](const BaselineRequest& request,
                  const RunDirectory& dir) -> StatusOr<std::vector<std::string>> {
    std::vector<std::string> traces;
    for (int run = 0; run < request.runs; ++run) {
      std::string trace = dir.File(fmt::format("run-{}.trace", run));
      PIPETUNE_RETURN_IF_ERROR(
          RunConfigFile(request.config_path, TracedRunOptions(request.seconds, trace)).status());
      traces.push_back(trace);
    }
    return traces;
  };
  config.read = [](const std::string& trace, size_t index, const std::string& first_trace,
                   MeasuredRuns& measured) -> StatusOr<models::Profile> {
    PIPETUNE_ASSIGN_OR_RETURN(TracedRun traced, CollectProfile({trace}));
    if (!traced.input.config)
      return InvalidInput(
          fmt::format("{}: the trace holds no pipeline config (a program traced with "
                      "`pipetune profile`): the gate needs a config's runs",
                      trace));
    if (index == 0) {
      measured.config = *traced.input.config;
      measured.identity = IdentityHash(measured.config);
      measured.stages = KnobsOf(measured.config);
      measured.pipeline = measured.config.name;
      measured.host = traced.host;
    } else if (IdentityHash(*traced.input.config) != measured.identity) {
      return InvalidInput(fmt::format("{}: a run of another pipeline than {} ({})", trace, first_trace,
                                      measured.config.name));
    }
    return std::move(traced.input.profile);
  };
  config.diagnose = [](const std::string& trace) { return analyzer::DiagnoseTraces({trace}); };
  // The config judged: the file the check names, read (and compared with
  // the baseline) before any run; else the first run's.
  config.prepare = [](const CheckRequest& request, const Baseline&) -> StatusOr<std::optional<MeasuredRuns>> {
    if (request.config_path.empty()) return std::optional<MeasuredRuns>();
    MeasuredRuns judged;
    PIPETUNE_ASSIGN_OR_RETURN(judged.config, models::LoadConfig(request.config_path));
    return std::optional<MeasuredRuns>(std::move(judged));
  };
  config.judges_without_runs = true;
  return config;
}

const RunAdapter& ConfigAdapter() {
  static const ConfigRunAdapter adapter;
  return adapter;
}

}  // namespace internal
}  // namespace pipetune::workflow

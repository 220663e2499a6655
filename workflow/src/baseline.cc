#include "pipetune/workflow/baseline.h"

#include <fmt/format.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "gate_judge.h"
#include "pipetune/analyzer/diagnosis.h"
#include "pipetune/base/files.h"
#include "pipetune/base/json.h"
#include "pipetune/base/text.h"
#include "pipetune/workflow/recording.h"
#include "pipetune/workflow/run.h"
#include "pipetune/workflow/tune.h"
#include "run_directory.h"

namespace pipetune::workflow {
namespace {

namespace fs = std::filesystem;

bool IsKnobStage(const models::StageConfig& stage) {
  return stage.op == models::Op::kPrefetch || stage.op == models::Op::kCache;
}

Json NumberOrNull(double value) { return std::isfinite(value) ? Json(value) : Json(nullptr); }

// Typed reads with errors naming file and key.
struct Reader {
  const std::string& source;
  Status Error(const std::string& key, const std::string& what) const {
    return InvalidInput(fmt::format("{}: baseline key \"{}\": {}", source, key, what));
  }
  StatusOr<const Json*> Field(const Json& object, const std::string& key, const std::string& path,
                              Json::value_t type) const {
    if (!object.is_object() || !object.contains(key)) return Error(path, "missing");
    const Json& value = object.at(key);
    bool ok = value.type() == type || (type == Json::value_t::number_float && value.is_number()) ||
              (type == Json::value_t::number_integer && value.is_number_integer());
    if (!ok)
      return Error(path, fmt::format("expected {}, got {}", Json(type).type_name(), value.type_name()));
    return &value;
  }
  StatusOr<double> Number(const Json& object, const std::string& key, const std::string& path) const {
    PIPETUNE_ASSIGN_OR_RETURN(const Json* value, Field(object, key, path, Json::value_t::number_float));
    return value->get<double>();
  }
  StatusOr<std::string> String(const Json& object, const std::string& key, const std::string& path) const {
    PIPETUNE_ASSIGN_OR_RETURN(const Json* value, Field(object, key, path, Json::value_t::string));
    return value->get<std::string>();
  }
  StatusOr<const Json*> Array(const Json& object, const std::string& key, const std::string& path) const {
    return Field(object, key, path, Json::value_t::array);
  }
};

// The "dataloader" object of a DataLoader's baseline.
StatusOr<DataLoaderGateSettings> ParseDataLoaderSettings(const Json& doc, const Reader& r) {
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
  PIPETUNE_ASSIGN_OR_RETURN(s.knobs.num_workers, integer("num_workers"));
  PIPETUNE_ASSIGN_OR_RETURN(s.knobs.prefetch_factor, integer("prefetch_factor"));
  PIPETUNE_ASSIGN_OR_RETURN(s.knobs.persistent_workers, flag("persistent_workers"));
  PIPETUNE_ASSIGN_OR_RETURN(s.knobs.pin_memory, flag("pin_memory"));
  return s;
}

}  // namespace

std::string IdentityHash(const models::PipelineConfig& config) {
  Json identity = Json::array();
  for (const models::StageConfig& stage : config.stages) {
    if (IsKnobStage(stage)) continue;
    identity.push_back(
        Json{{"name", stage.name}, {"op", models::OpName(stage.op)}, {"fn", stage.fn}, {"args", stage.args}});
  }
  return internal::HashIdentity(identity);
}

namespace internal {

std::string HashIdentity(const Json& identity) {
  return fmt::format("{:016x}", Fnv1a64(DumpJson(identity), kBaselineHashBasis));
}

}  // namespace internal

std::vector<StageKnobs> KnobsOf(const models::PipelineConfig& config) {
  std::vector<StageKnobs> knobs;
  for (const models::StageConfig& stage : config.stages) {
    // The baseline file spells the location as the config does.
    std::optional<std::string> location;
    if (stage.location) location = stage.location->ConfigValue();
    knobs.push_back(
        {stage.name, models::OpName(stage.op), stage.fn, stage.parallelism, stage.buffer, location});
  }
  return knobs;
}

RunRecord RecordOf(const models::Profile& profile) {
  RunRecord record;
  record.throughput = profile.measured_throughput;
  for (const models::StageProfile& stage : profile.stages) {
    // A stage the run did not have (a DataLoader's transfer without workers)
    // has an estimated cost, not a measured one: 0, not judged.
    double cpu = stage.estimated ? 0.0 : stage.cpu_seconds_per_element;
    double wall = stage.estimated ? 0.0 : stage.measured_latency_seconds;
    record.stages.push_back({stage.name, cpu, wall, stage.elements, stage.visit_ratio});
  }
  return record;
}

namespace internal {

StatusOr<MeasuredRuns> MeasureRunsOf(const RunKind& kind, const BaselineRequest& request, bool diagnose) {
  std::vector<std::string> traces = kind.main_traces ? kind.main_traces(request.traces) : request.traces;
  std::optional<RunDirectory> dir;  // lives until the traces are read
  if (traces.empty()) {
    if (request.runs < 1) return InvalidInput("--runs: at least one run is needed to measure");
    PIPETUNE_ASSIGN_OR_RETURN(RunDirectory made, RunDirectory::Make(request.trace_dir, "pipetune-gate"));
    dir.emplace(std::move(made));
    PIPETUNE_ASSIGN_OR_RETURN(traces, kind.run(request, *dir));
  }
  MeasuredRuns measured;
  for (size_t i = 0; i < traces.size(); ++i) {
    PIPETUNE_ASSIGN_OR_RETURN(models::Profile profile, kind.read(traces[i], i, traces[0], measured));
    RunRecord record = RecordOf(profile);
    record.trace = traces[i];
    measured.runs.push_back(std::move(record));
    if (i == 0) measured.first_profile = std::move(profile);
  }
  if (diagnose && !traces.empty()) {
    PIPETUNE_ASSIGN_OR_RETURN(analyzer::Diagnosis diagnosis, kind.diagnose(traces.back()));
    measured.bottleneck = diagnosis.bottleneck;
    measured.why = diagnosis.summary;
  }
  return measured;
}

RunKind ConfigRunKind() {
  RunKind config;
  config.run = [](const BaselineRequest& request,
                  const RunDirectory& dir) -> StatusOr<std::vector<std::string>> {
    std::vector<std::string> traces;
    for (int run = 0; run < request.runs; ++run) {
      RunConfigOptions options;
      options.seconds = request.seconds;
      options.trace_path = dir.File(fmt::format("run-{}.trace", run));
      PIPETUNE_RETURN_IF_ERROR(RunConfigFile(request.config_path, options).status());
      traces.push_back(options.trace_path);
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
  // The config judged: the file the check names, else the first run's.
  auto judged = std::make_shared<std::optional<models::PipelineConfig>>();
  config.prepare = [judged](const CheckRequest& request, const Baseline& baseline) -> Status {
    if (request.config_path.empty()) return Status::Ok();
    PIPETUNE_ASSIGN_OR_RETURN(*judged, models::LoadConfig(request.config_path));
    // Refuse another pipeline before spending time on runs.
    return SamePipeline(baseline, **judged, request.baseline_path);
  };
  config.same = [judged](const Baseline& baseline, const MeasuredRuns& measured,
                         const std::string& name) -> Status {
    if (*judged) return Status::Ok();  // compared before the runs
    *judged = measured.config;
    return SamePipeline(baseline, measured.config, name);
  };
  config.judge = [judged](const Baseline& baseline, const MeasuredRuns* measured,
                          const JudgeOptions& options) {
    return Judge(baseline, judged->value_or(models::PipelineConfig{}), measured ? &measured->runs : nullptr,
                 options);
  };
  config.judges_without_runs = true;
  return config;
}

RunKind RunKindFor(const BaselineRequest& request, const Baseline* baseline) {
  if (baseline != nullptr && baseline->kind == kDataLoaderBaseline) return DataLoaderRunKind();
  // A program against a config-kind baseline recorded from a program is a
  // tf.data script's; against one of a config, a DataLoader's kind refuses it
  // by name; with no baseline yet, its first run tells (ProgramRunKind).
  if (!request.command.empty()) {
    if (baseline == nullptr) return ProgramRunKind();
    return baseline->command.empty() ? DataLoaderRunKind() : TfDataRunKind();
  }
  return OpenRecording(request.traces).is_dataloader() ? DataLoaderRunKind() : ConfigRunKind();
}

}  // namespace internal

StatusOr<MeasuredRuns> MeasureRuns(const BaselineRequest& request, bool diagnose) {
  return internal::MeasureRunsOf(internal::RunKindFor(request), request, diagnose);
}

StatusOr<Baseline> RecordBaseline(const BaselineRequest& request) {
  PIPETUNE_ASSIGN_OR_RETURN(MeasuredRuns measured, MeasureRuns(request, false));
  Baseline baseline;
  if (measured.dataloader) {
    baseline.kind = kDataLoaderBaseline;
    baseline.dataloader = measured.dataloader;
  }
  baseline.command = request.command;  // a tf.data script's too: its check runs it again
  baseline.pipeline = std::move(measured.pipeline);
  baseline.identity = std::move(measured.identity);
  baseline.stages = std::move(measured.stages);
  baseline.model = std::move(measured.first_profile);
  baseline.host = measured.host;
  baseline.runs = std::move(measured.runs);
  return baseline;
}

Json BaselineToJson(const Baseline& baseline) {
  Json stages = Json::array();
  for (const StageKnobs& stage : baseline.stages) {
    Json s{{"name", stage.name}, {"op", stage.op}};
    if (!stage.fn.empty()) s["fn"] = stage.fn;
    s["parallelism"] = stage.parallelism;
    if (stage.buffer) s["buffer"] = *stage.buffer;
    if (stage.location) s["location"] = *stage.location;
    stages.push_back(std::move(s));
  }
  const models::Profile& p = baseline.model;
  Json model_stages = Json::array();
  for (const models::StageProfile& s : p.stages) {
    model_stages.push_back(Json{{"name", s.name},
                                {"op", s.op_name},
                                {"parallelism", s.parallelism},
                                {"parallel", s.parallel},
                                {"random", s.random},
                                {"cpu_seconds_per_element", s.cpu_seconds_per_element},
                                {"latency_seconds", s.latency_seconds},
                                {"visit_ratio", s.visit_ratio},
                                {"local_ratio", s.local_ratio},
                                {"bytes_per_element", s.bytes_per_element}});
  }
  Json model{{"cores", p.cores}, {"other_cpu_cores", p.other_cpu_cores}, {"stages", model_stages}};
  model["step_time_seconds"] = p.step_time_seconds ? Json(*p.step_time_seconds) : Json(nullptr);
  model["storage_bytes_per_second"] =
      p.storage_bytes_per_second ? Json(*p.storage_bytes_per_second) : Json(nullptr);
  model["storage_bytes_per_output"] = p.storage_bytes_per_output;
  model["storage_stage"] = p.storage_stage ? Json(*p.storage_stage) : Json(nullptr);
  model["cache_stage"] = p.cache_stage ? Json(*p.cache_stage) : Json(nullptr);
  model["cache_filled"] = p.cache_filled;

  const tracer::HostFacts& h = baseline.host;
  Json host{{"hostname", h.hostname},
            {"cores_online", h.cores_online},
            {"cores_allowed", h.cores_allowed},
            {"cpu_quota_cores", h.CpuQuotaCores()},
            {"memory_total_bytes", h.memory_total_bytes}};
  Json runs = Json::array();
  for (const RunRecord& run : baseline.runs) {
    Json run_stages = Json::array();
    for (const StageRun& s : run.stages) {
      run_stages.push_back(Json{{"name", s.name},
                                {"cpu_seconds_per_element", NumberOrNull(s.cpu_seconds_per_element)},
                                {"wall_seconds_per_element", NumberOrNull(s.wall_seconds_per_element)},
                                {"elements", s.elements},
                                {"visit_ratio", s.visit_ratio}});
    }
    runs.push_back(Json{{"throughput", NumberOrNull(run.throughput)}, {"stages", run_stages}});
  }
  Json doc{{"pipetune_baseline", kBaselineVersion},
           {"kind", baseline.kind},
           {"pipeline", baseline.pipeline},
           {"identity", baseline.identity}};
  if (const std::optional<DataLoaderGateSettings>& d = baseline.dataloader) {
    doc["dataloader"] = Json{{"batch_size", d->batch_size},
                             {"dataset", d->dataset},
                             {"num_workers", d->knobs.num_workers},
                             {"prefetch_factor", d->knobs.prefetch_factor},
                             {"persistent_workers", d->knobs.persistent_workers},
                             {"pin_memory", d->knobs.pin_memory}};
  }
  if (!baseline.command.empty()) doc["command"] = baseline.command;
  doc["stages"] = stages;
  doc["model"] = model;
  doc["host"] = host;
  doc["runs"] = runs;
  return doc;
}

StatusOr<Baseline> ParseBaseline(std::string_view text, const std::string& source_name) {
  Json doc = Json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded()) {
    // Parse again to learn where it broke: the parser's byte offset.
    try {
      Json again = Json::parse(text);
      (void)again;
    } catch (const Json::parse_error& error) {
      return InvalidInput(
          fmt::format("{}: not a JSON baseline: byte offset {}: {}", source_name, error.byte, error.what()));
    }
    return InvalidInput(fmt::format("{}: not a JSON baseline", source_name));
  }
  Reader r{source_name};
  if (!doc.is_object() || !doc.contains("pipetune_baseline"))
    return InvalidInput(
        fmt::format("{}: not a pipetune baseline (no \"pipetune_baseline\" key); record one "
                    "with `pipetune baseline CONFIG -o FILE`",
                    source_name));
  PIPETUNE_ASSIGN_OR_RETURN(double version, r.Number(doc, "pipetune_baseline", "pipetune_baseline"));
  if (version > kBaselineVersion)
    return r.Error("pipetune_baseline", fmt::format("version {} is newer than this pipetune reads ({})",
                                                    version, kBaselineVersion));
  Baseline b;
  if (doc.contains("kind")) {
    PIPETUNE_ASSIGN_OR_RETURN(b.kind, r.String(doc, "kind", "kind"));
    if (b.kind != kConfigBaseline && b.kind != kDataLoaderBaseline)
      return r.Error("kind", fmt::format("expected \"{}\" or \"{}\", got \"{}\"", kConfigBaseline,
                                         kDataLoaderBaseline, b.kind));
  }
  PIPETUNE_ASSIGN_OR_RETURN(b.pipeline, r.String(doc, "pipeline", "pipeline"));
  if (b.kind == kDataLoaderBaseline) {
    PIPETUNE_ASSIGN_OR_RETURN(b.dataloader, ParseDataLoaderSettings(doc, r));
  }
  if (doc.contains("command") && doc["command"].is_array()) {
    for (const Json& word : doc["command"]) {
      if (word.is_string()) b.command.push_back(word.get<std::string>());
    }
  }
  PIPETUNE_ASSIGN_OR_RETURN(b.identity, r.String(doc, "identity", "identity"));
  PIPETUNE_ASSIGN_OR_RETURN(const Json* stages, r.Array(doc, "stages", "stages"));
  for (size_t i = 0; i < stages->size(); ++i) {
    const Json& s = (*stages)[i];
    std::string at = fmt::format("stages[{}]", i);
    StageKnobs k;
    PIPETUNE_ASSIGN_OR_RETURN(k.name, r.String(s, "name", at + ".name"));
    PIPETUNE_ASSIGN_OR_RETURN(k.op, r.String(s, "op", at + ".op"));
    if (s.contains("fn")) {
      PIPETUNE_ASSIGN_OR_RETURN(k.fn, r.String(s, "fn", at + ".fn"));
    }
    PIPETUNE_ASSIGN_OR_RETURN(double parallelism, r.Number(s, "parallelism", at + ".parallelism"));
    k.parallelism = static_cast<int>(parallelism);
    if (s.contains("buffer")) {
      PIPETUNE_ASSIGN_OR_RETURN(double buffer, r.Number(s, "buffer", at + ".buffer"));
      k.buffer = static_cast<int64_t>(buffer);
    }
    if (s.contains("location")) {
      PIPETUNE_ASSIGN_OR_RETURN(std::string location, r.String(s, "location", at + ".location"));
      k.location = location;
    }
    b.stages.push_back(std::move(k));
  }

  PIPETUNE_ASSIGN_OR_RETURN(const Json* model, r.Field(doc, "model", "model", Json::value_t::object));
  models::Profile& p = b.model;
  p.pipeline_name = b.pipeline;
  PIPETUNE_ASSIGN_OR_RETURN(p.cores, r.Number(*model, "cores", "model.cores"));
  PIPETUNE_ASSIGN_OR_RETURN(p.other_cpu_cores, r.Number(*model, "other_cpu_cores", "model.other_cpu_cores"));
  auto optional_number = [&](const char* key) -> StatusOr<std::optional<double>> {
    if (!model->contains(key) || model->at(key).is_null()) return std::optional<double>();
    PIPETUNE_ASSIGN_OR_RETURN(double v, r.Number(*model, key, std::string("model.") + key));
    return std::optional<double>(v);
  };
  PIPETUNE_ASSIGN_OR_RETURN(p.step_time_seconds, optional_number("step_time_seconds"));
  PIPETUNE_ASSIGN_OR_RETURN(p.storage_bytes_per_second, optional_number("storage_bytes_per_second"));
  PIPETUNE_ASSIGN_OR_RETURN(std::optional<double> per_output, optional_number("storage_bytes_per_output"));
  p.storage_bytes_per_output = per_output.value_or(0);
  PIPETUNE_ASSIGN_OR_RETURN(std::optional<double> storage_stage, optional_number("storage_stage"));
  PIPETUNE_ASSIGN_OR_RETURN(std::optional<double> cache_stage, optional_number("cache_stage"));
  PIPETUNE_ASSIGN_OR_RETURN(const Json* model_stages, r.Array(*model, "stages", "model.stages"));
  for (size_t i = 0; i < model_stages->size(); ++i) {
    const Json& s = (*model_stages)[i];
    std::string at = fmt::format("model.stages[{}]", i);
    models::StageProfile st;
    PIPETUNE_ASSIGN_OR_RETURN(st.name, r.String(s, "name", at + ".name"));
    PIPETUNE_ASSIGN_OR_RETURN(st.op_name, r.String(s, "op", at + ".op"));
    st.op = models::OpFromName(st.op_name);
    PIPETUNE_ASSIGN_OR_RETURN(double parallelism, r.Number(s, "parallelism", at + ".parallelism"));
    st.parallelism = std::max(1, static_cast<int>(parallelism));
    st.parallel = s.value("parallel", false);
    st.random = s.value("random", false);
    PIPETUNE_ASSIGN_OR_RETURN(st.cpu_seconds_per_element,
                              r.Number(s, "cpu_seconds_per_element", at + ".cpu_seconds_per_element"));
    PIPETUNE_ASSIGN_OR_RETURN(st.latency_seconds, r.Number(s, "latency_seconds", at + ".latency_seconds"));
    PIPETUNE_ASSIGN_OR_RETURN(st.visit_ratio, r.Number(s, "visit_ratio", at + ".visit_ratio"));
    PIPETUNE_ASSIGN_OR_RETURN(st.local_ratio, r.Number(s, "local_ratio", at + ".local_ratio"));
    PIPETUNE_ASSIGN_OR_RETURN(st.bytes_per_element,
                              r.Number(s, "bytes_per_element", at + ".bytes_per_element"));
    st.cpu_seconds_per_output = st.cpu_seconds_per_element * st.visit_ratio;
    p.stages.push_back(std::move(st));
  }
  if (storage_stage && *storage_stage >= 0 && *storage_stage < static_cast<double>(p.stages.size()))
    p.storage_stage = static_cast<size_t>(*storage_stage);
  if (cache_stage && *cache_stage >= 0 && *cache_stage < static_cast<double>(p.stages.size()))
    p.cache_stage = static_cast<size_t>(*cache_stage);
  p.cache_filled = model->value("cache_filled", false);

  if (doc.contains("host") && doc["host"].is_object()) {
    const Json& h = doc["host"];
    b.host.hostname = h.value("hostname", "");
    b.host.cores_online = h.value("cores_online", 0u);
    b.host.cores_allowed = h.value("cores_allowed", 0u);
    b.host.memory_total_bytes = h.value("memory_total_bytes", int64_t{-1});
  }

  PIPETUNE_ASSIGN_OR_RETURN(const Json* runs, r.Array(doc, "runs", "runs"));
  for (size_t i = 0; i < runs->size(); ++i) {
    const Json& run = (*runs)[i];
    std::string at = fmt::format("runs[{}]", i);
    RunRecord record;
    if (run.is_object() && run.contains("throughput") && run["throughput"].is_null()) {
      record.throughput = 0;
    } else {
      PIPETUNE_ASSIGN_OR_RETURN(record.throughput, r.Number(run, "throughput", at + ".throughput"));
    }
    PIPETUNE_ASSIGN_OR_RETURN(const Json* run_stages, r.Array(run, "stages", at + ".stages"));
    for (size_t j = 0; j < run_stages->size(); ++j) {
      const Json& s = (*run_stages)[j];
      std::string sat = fmt::format("{}.stages[{}]", at, j);
      StageRun sr;
      PIPETUNE_ASSIGN_OR_RETURN(sr.name, r.String(s, "name", sat + ".name"));
      if (!s.contains("cpu_seconds_per_element") || !s["cpu_seconds_per_element"].is_null()) {
        PIPETUNE_ASSIGN_OR_RETURN(sr.cpu_seconds_per_element,
                                  r.Number(s, "cpu_seconds_per_element", sat + ".cpu_seconds_per_element"));
      }
      if (s.contains("wall_seconds_per_element") && s["wall_seconds_per_element"].is_number())
        sr.wall_seconds_per_element = s["wall_seconds_per_element"].get<double>();
      sr.elements = s.value("elements", 0.0);
      sr.visit_ratio = s.value("visit_ratio", 1.0);
      record.stages.push_back(std::move(sr));
    }
    b.runs.push_back(std::move(record));
  }
  if (b.runs.empty()) return r.Error("runs", "no runs recorded");
  return b;
}

StatusOr<Baseline> LoadBaseline(const std::string& path) {
  PIPETUNE_ASSIGN_OR_RETURN(std::string text, ReadFile(path, "the baseline"));
  return ParseBaseline(text, path);
}

Status SaveBaseline(const Baseline& baseline, const std::string& path) {
  return WriteFileAtomically(path, DumpJson(BaselineToJson(baseline), 2) + "\n");
}

}  // namespace pipetune::workflow

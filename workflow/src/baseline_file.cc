// The baseline file (baseline.h): written with a fixed key order, read with
// errors naming the file and the key; its kind's settings section is the
// kind's adapter's to write and read (adapter.h).
#include <fmt/format.h>

#include <cmath>
#include <string>

#include "adapter.h"
#include "baseline_reader.h"
#include "pipetune/base/files.h"
#include "pipetune/base/json.h"
#include "pipetune/workflow/baseline.h"

namespace pipetune::workflow {
namespace {

Json NumberOrNull(double value) { return std::isfinite(value) ? Json(value) : Json(nullptr); }

}  // namespace

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
  internal::AdapterOf(baseline).WriteBaselineSettings(baseline, doc);
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
  internal::Reader r{source_name};
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
    if (internal::AdapterNamed(b.kind) == nullptr) {
      // The kinds this pipetune knows: "config", "dataloader" or "tfdata".
      std::string known;
      const std::vector<const internal::RunAdapter*>& adapters = internal::Adapters();
      for (size_t i = 0; i < adapters.size(); ++i) {
        const char* separator = i == 0 ? "" : (i + 1 == adapters.size() ? " or " : ", ");
        known += fmt::format("{}\"{}\"", separator, adapters[i]->kind());
      }
      return r.Error("kind", fmt::format("expected {}, got \"{}\"", known, b.kind));
    }
  }
  PIPETUNE_ASSIGN_OR_RETURN(b.pipeline, r.String(doc, "pipeline", "pipeline"));
  PIPETUNE_RETURN_IF_ERROR(internal::AdapterOf(b).ReadBaselineSettings(doc, source_name, b));
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

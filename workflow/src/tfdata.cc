// What tf.data's adapter (tfdata_adapter.cc) calls: a tuned config back to
// a plan keyed by call site, and the plan file read for --apply (tfdata.h).
#include "pipetune/workflow/tfdata.h"

#include <fmt/format.h>

#include <filesystem>
#include <map>
#include <string_view>

#include "pipetune/base/files.h"
#include "pipetune/tracer/reader.h"

namespace pipetune::workflow {
namespace {

namespace fs = std::filesystem;

// The settings a plan may give a site, and the smallest value each takes.
const std::map<std::string, int>& IntegerSettings() {
  static const std::map<std::string, int> settings = {
      {"num_parallel_calls", 1}, {"cycle_length", 1}, {"buffer_size", 1}, {"prefetch_after", 1}};
  return settings;
}

bool AllOf(std::string_view text, const char* set) {
  return !text.empty() && text.find_first_not_of(set) == std::string_view::npos;
}

// A plan's key: "PATH:LINE METHOD", and "#N" after the method for the Nth
// call of it on one line (N >= 2; the first call has no ordinal, as every
// call had in plans written before ordinals).
bool SiteShaped(std::string_view site) {
  size_t space = site.rfind(' ');
  if (space == std::string_view::npos) return false;
  std::string_view place = site.substr(0, space);
  std::string_view call = site.substr(space + 1);
  size_t colon = place.rfind(':');
  if (colon == std::string_view::npos || colon == 0 || !AllOf(place.substr(colon + 1), "0123456789"))
    return false;
  size_t hash = call.find('#');
  std::string_view method = call.substr(0, hash);
  if (!AllOf(method, "abcdefghijklmnopqrstuvwxyz_")) return false;
  if (hash == std::string_view::npos) return true;
  std::string_view ordinal = call.substr(hash + 1);
  return AllOf(ordinal, "0123456789") && ordinal.size() <= 6 && ordinal != "0" && ordinal != "1" &&
         ordinal[0] != '0';
}

// The record's op of each stage, by the stage's name.
std::map<std::string, Json> OpsByStage(const models::PipelineConfig& traced) {
  std::map<std::string, Json> ops;
  const Json& record = traced.raw.contains(kTfDataRecordKey) ? traced.raw[kTfDataRecordKey] : Json();
  if (!record.is_object() || !record.contains("ops") || !record["ops"].is_array()) return ops;
  for (const Json& op : record["ops"]) {
    if (op.is_object() && op.contains("stage") && op["stage"].is_string()) ops[op["stage"]] = op;
  }
  return ops;
}

std::string Text(const Json& object, const char* key, const std::string& fallback = "") {
  auto it = object.find(key);
  return it != object.end() && it->is_string() ? it->get<std::string>() : fallback;
}

int Integer(const Json& object, const char* key, int fallback) {
  auto it = object.find(key);
  return it != object.end() && it->is_number_integer() ? it->get<int>() : fallback;
}

// "ds" in "ds = ds.map(process_path)": the expression the call was made on,
// as written on its line; "ds" when the line does not show it.
std::string Receiver(const std::string& code, const std::string& method) {
  size_t at = code.find("." + method + "(");
  if (at == std::string::npos) return "ds";
  size_t begin = at;
  while (begin > 0) {
    char c = code[begin - 1];
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.')) break;
    --begin;
  }
  return begin == at ? "ds" : code.substr(begin, at - begin);
}

// "images" in "images = ds.batch(32)": the name the line gives the
// dataset it makes; `fallback` where it gives none.
std::string AssignedName(const std::string& code, const std::string& fallback) {
  size_t end = 0;
  while (end < code.size() && (std::isalnum(static_cast<unsigned char>(code[end])) || code[end] == '_'))
    ++end;
  if (end == 0 || std::isdigit(static_cast<unsigned char>(code[0]))) return fallback;
  size_t eq = code.find_first_not_of(' ', end);
  if (eq == std::string::npos || code[eq] != '=' || (eq + 1 < code.size() && code[eq + 1] == '='))
    return fallback;
  return code.substr(0, end);
}

// The call as written ("ds.batch(32)"), from its receiver to its closing
// parenthesis; the method and "(...)" when the line does not hold it whole.
std::string CallAsWritten(const std::string& code, const std::string& receiver, const std::string& method) {
  size_t at = code.find(receiver + "." + method + "(");
  if (at != std::string::npos) {
    int depth = 0;
    for (size_t i = at + receiver.size() + method.size() + 1; i < code.size(); ++i) {
      if (code[i] == '(') ++depth;
      if (code[i] == ')' && --depth == 0) return code.substr(at, i - at + 1);
    }
  }
  return receiver + "." + method + "(...)";
}

// The line a user would write for `op` with `settings`.
std::string CodeChange(const Json& op, const Json& settings) {
  const std::string method = Text(op, "method");
  const std::string code = Text(op, "code");
  const std::string receiver = Receiver(code, method);
  std::string fn = Text(op, "fn", "fn");
  if (fn == "lambda") fn = "lambda ...";
  std::string call;
  if (method == "map" && settings.contains("num_parallel_calls")) {
    call = fmt::format("{}.map({}, num_parallel_calls={})", receiver, fn,
                       settings["num_parallel_calls"].get<int>());
  } else if (method == "interleave" && settings.contains("num_parallel_calls")) {
    call = fmt::format("{}.interleave({}, cycle_length={}, num_parallel_calls={})", receiver, fn,
                       settings.value("cycle_length", 1), settings["num_parallel_calls"].get<int>());
  } else if (method == "prefetch" && settings.contains("buffer_size")) {
    call = fmt::format("{}.prefetch({})", receiver, settings["buffer_size"].get<int>());
  } else {
    call = CallAsWritten(code, receiver, method);
  }
  if (settings.contains("cache_after")) {
    const std::string where = settings["cache_after"].get<std::string>();
    call += where == "memory" ? ".cache()" : fmt::format(".cache(\"{}\")", where);
  }
  if (settings.contains("prefetch_after"))
    call += fmt::format(".prefetch({})", settings["prefetch_after"].get<int>());
  return fmt::format("{}:{}  {}", Text(op, "file"), Integer(op, "line", 0), call);
}

// Whether the settings change what the call does as written.
bool Changes(const Json& op, const Json& settings) {
  const Json args = op.contains("args") && op["args"].is_object() ? op["args"] : Json::object();
  for (const auto& [key, value] : settings.items()) {
    if (key == "cache_after" || key == "prefetch_after") return true;
    if (!args.contains(key) || args[key] != value) return true;
  }
  return false;
}

// A disk cache's file prefix: TensorFlow's cache(filename) writes
// filename.index and filename_*.data there.
std::string DiskCacheFile(const std::string& directory, const Json& op) {
  std::string stem = fs::path(Text(op, "file", "script")).stem().string();
  return (fs::path(directory) / fmt::format("tfdata_cache_{}_{}", stem, Integer(op, "line", 0))).string();
}

// Whether the plan's settings leave TensorFlow's autotune something to tune
// (tfdata.h, TfDataPlan): an op of the script that TensorFlow tunes (a map
// or interleave, which it makes parallel where written sequential; a
// prefetch, its own injected one included) whose knob the plan does not
// set, an op it could not tie to a call, or an argument written AUTOTUNE
// (-1) that the plan keeps.
bool LeavesAutotuneWork(const std::map<std::string, Json>& ops, const Json& sites) {
  for (const auto& [stage, op] : ops) {
    if (op.value("added", false)) continue;  // the plan's own cache or prefetch: set by it
    const std::string site = Text(op, "call_site");
    if (site.empty() || op.contains("untagged")) return true;  // no call the plan could set
    const Json settings = sites.contains(site) ? sites[site] : Json::object();
    const std::string method = Text(op, "method");
    if (op.value("added_by_tensorflow", false)) {
      if (!settings.contains("prefetch_after")) return true;
      continue;
    }
    if ((method == "map" || method == "interleave") && !settings.contains("num_parallel_calls")) return true;
    if (method == "prefetch" && !settings.contains("buffer_size")) return true;
    const Json args = op.contains("args") && op["args"].is_object() ? op["args"] : Json::object();
    for (const auto& [key, value] : args.items()) {
      if (value.is_number_integer() && value.get<int64_t>() == -1 && !settings.contains(key)) return true;
    }
  }
  return false;
}

}  // namespace

bool IsTfDataTraceFile(const std::string& path) {
  // The bootstrap starts its session with the record in the config, so the
  // header alone tells.
  StatusOr<tracer::TraceHeader> header = tracer::ReadTraceHeader(path);
  if (!header.ok()) return false;
  Json config = Json::parse(header->pipeline.config_json, nullptr, /*allow_exceptions=*/false);
  return config.is_object() && config.contains(kTfDataRecordKey);
}

StatusOr<TfDataPlan> TfDataPlanFrom(const models::PipelineConfig& traced,
                                    const models::PipelineConfig& tuned) {
  const std::map<std::string, Json> ops = OpsByStage(traced);
  TfDataPlan plan;
  std::map<std::string, Json> op_of_site;
  std::vector<std::string> order;
  auto settings_of = [&](const std::string& site, const Json& op) -> Json& {
    if (!plan.sites.contains(site)) {
      plan.sites[site] = Json::object();
      op_of_site[site] = op;
      order.push_back(site);
    }
    return plan.sites[site];
  };
  std::string last_site;
  Json last_op;
  for (const models::StageConfig& stage : tuned.stages) {
    if (stage.raw.value("tfdata_epochs", false)) continue;  // the script's loop, not a call
    auto op_it = ops.find(stage.name);
    const std::string site = Text(stage.raw, "call_site");
    if (!site.empty() && op_it != ops.end()) {
      const Json& op = op_it->second;
      const std::string method = Text(op, "method");
      const Json args = op.contains("args") && op["args"].is_object() ? op["args"] : Json::object();
      if (op.value("added", false)) {
        // Added by the plan a run applied (a verify round's): kept as it was,
        // or the next plan would drop it.
        Json& settings = settings_of(site, op_of_site.count(site) ? op_of_site[site] : op);
        if (stage.op == models::Op::kCache) settings["cache_after"] = Text(args, "location", "memory");
        if (stage.op == models::Op::kPrefetch) {
          settings["prefetch_after"] =
              static_cast<int>(stage.buffer.value_or(Integer(args, "buffer_size", 1)));
        }
      } else if (op.value("added_by_tensorflow", false)) {
        if (stage.buffer)
          settings_of(site, op_of_site.count(site) ? op_of_site[site] : op)["prefetch_after"] = *stage.buffer;
      } else if (stage.op == models::Op::kMap && (method == "map" || method == "interleave")) {
        Json& settings = settings_of(site, op);
        settings["num_parallel_calls"] = stage.parallelism;
        if (method == "interleave") {
          int cycle =
              Integer(op.contains("args") ? op["args"] : Json::object(), "cycle_length", stage.parallelism);
          settings["cycle_length"] = std::max(cycle, stage.parallelism);
        }
      } else if (stage.op == models::Op::kPrefetch && stage.buffer) {
        settings_of(site, op)["buffer_size"] = *stage.buffer;
      } else {
        settings_of(site, op);
      }
      last_site = site;
      last_op = op_of_site[site];
      continue;
    }
    if (last_site.empty()) {
      return InvalidInput(fmt::format(
          "the plan puts stage \"{}\" before every op of the script: no call to add it to", stage.name));
    }
    Json& settings = plan.sites[last_site];
    if (stage.op == models::Op::kCache) {
      bool memory = !stage.location || stage.location->in_memory();
      settings["cache_after"] =
          memory ? std::string("memory") : DiskCacheFile(stage.location->directory, last_op);
    } else if (stage.op == models::Op::kPrefetch) {
      settings["prefetch_after"] = stage.buffer.value_or(1);
    } else {
      return InvalidInput(fmt::format("the plan adds a {} stage (\"{}\"), which a tf.data plan cannot place",
                                      models::OpName(stage.op), stage.name));
    }
  }
  Json kept = Json::object();
  for (const std::string& site : order) {
    const Json& settings = plan.sites[site];
    if (settings.empty()) continue;
    kept[site] = settings;
    if (Changes(op_of_site[site], settings))
      plan.code_change.push_back(CodeChange(op_of_site[site], settings));
  }
  plan.sites = std::move(kept);
  plan.autotune_off = !ops.empty() && !LeavesAutotuneWork(ops, plan.sites);
  if (plan.autotune_off && !last_site.empty()) {
    const Json& op = op_of_site[last_site];
    const std::string name = AssignedName(Text(op, "code"), Receiver(Text(op, "code"), Text(op, "method")));
    plan.code_change.push_back(fmt::format(
        "{}:{}  and after it: options = tf.data.Options(); options.autotune.enabled = False; {} = "
        "{}.with_options(options)  # every knob is set: TensorFlow's autotuner has nothing to tune",
        Text(op, "file"), Integer(op, "line", 0), name, name));
  }
  return plan;
}

Json TfDataPlanToJson(const TfDataPlan& plan) {
  Json body = Json::object();
  body["version"] = 1;
  body["sites"] = plan.sites;
  if (plan.autotune_off) body["options"] = Json{{"autotune", false}};
  body["code_change"] = plan.code_change;
  Json document = Json::object();
  document[kTfDataPlanKey] = std::move(body);
  return document;
}

std::string TfDataPlanPath(const std::string& requested, const std::string& trace) {
  if (!requested.empty()) return requested;
  fs::path p(trace);
  return (p.parent_path() / (p.stem().string() + ".tfdata.json")).string();
}

bool IsTfDataPlanFile(const std::string& path) {
  StatusOr<std::string> text = ReadFile(path, "the plan");
  if (!text.ok()) return false;
  Json j = Json::parse(*text, nullptr, /*allow_exceptions=*/false);
  return j.is_object() && j.contains(kTfDataPlanKey);
}

StatusOr<Json> ReadTfDataPlan(const std::string& path) {
  PIPETUNE_ASSIGN_OR_RETURN(std::string text, ReadFile(path, "the tf.data plan"));
  return ParseTfDataPlan(text, path);
}

StatusOr<Json> ParseTfDataPlan(std::string_view text, const std::string& path) {
  PIPETUNE_ASSIGN_OR_RETURN(Json j, models::ParseJsonDocument(text, path));
  if (!j.is_object() || !j.contains(kTfDataPlanKey) || !j[kTfDataPlanKey].is_object()) {
    return InvalidInput(fmt::format("{}: expected a JSON object with \"{}\" (pipetune tune's .tfdata.json)",
                                    path, kTfDataPlanKey));
  }
  const Json& plan = j[kTfDataPlanKey];
  if (!plan.contains("sites") || !plan["sites"].is_object()) {
    return InvalidInput(
        fmt::format("{}: key \"{}.sites\": expected an object of call sites", path, kTfDataPlanKey));
  }
  if (plan.contains("options")) {
    const Json& options = plan["options"];
    if (!options.is_object())
      return InvalidInput(fmt::format("{}: key \"{}.options\": expected an object ({{\"autotune\": false}})",
                                      path, kTfDataPlanKey));
    for (const auto& [key, value] : options.items()) {
      if (key != "autotune")
        return InvalidInput(
            fmt::format("{}: key \"{}.options\": unknown key \"{}\"", path, kTfDataPlanKey, key));
      if (!value.is_boolean())
        return InvalidInput(fmt::format("{}: key \"{}.options.autotune\": expected true or false, got {}",
                                        path, kTfDataPlanKey, DumpJson(value)));
    }
  }
  for (const auto& [site, settings] : plan["sites"].items()) {
    if (!SiteShaped(site)) {
      return InvalidInput(fmt::format(
          "{}: site \"{}\": expected \"PATH:LINE METHOD\" or \"PATH:LINE METHOD#N\" (N >= 2)", path, site));
    }
    if (!settings.is_object()) {
      return InvalidInput(fmt::format("{}: site \"{}\": expected an object of settings", path, site));
    }
    for (const auto& [key, value] : settings.items()) {
      if (key == "cache_after") {
        if (!value.is_string() || value.get<std::string>().empty()) {
          return InvalidInput(fmt::format(
              "{}: site \"{}\": key \"cache_after\": expected \"memory\" or a file path", path, site));
        }
        continue;
      }
      auto known = IntegerSettings().find(key);
      if (known == IntegerSettings().end()) {
        return InvalidInput(fmt::format("{}: site \"{}\": unknown key \"{}\"", path, site, key));
      }
      if (!value.is_number_integer() || value.get<int64_t>() < known->second) {
        return InvalidInput(fmt::format("{}: site \"{}\": key \"{}\": expected an integer >= {}, got {}",
                                        path, site, key, known->second, DumpJson(value)));
      }
    }
  }
  return j;
}

StatusOr<ProgramSettings> TfDataPlanSettings(const std::string& path) {
  PIPETUNE_RETURN_IF_ERROR(ReadTfDataPlan(path).status());
  std::error_code error;
  return ProgramSettings("PIPETUNE_TFDATA_APPLY", fs::absolute(path, error).string());
}

}  // namespace pipetune::workflow

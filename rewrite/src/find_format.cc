// The finder's results as text and as JSON (`pipetune-rewrite find`).
#include <fmt/format.h>

#include <map>
#include <string>

#include "pipetune/base/json.h"
#include "pipetune/rewrite/finder.h"

namespace pipetune::rewrite {

namespace {

std::map<std::string, std::string> StageKnobValues(const FoundPipeline& p, const std::string& stage) {
  std::map<std::string, std::string> out;
  for (const KnobSite& k : p.knobs) {
    if (k.stage == stage) out[k.knob] = k.value.value_or("?");
  }
  return out;
}

}  // namespace

std::string FormatFindText(const FindResult& result) {
  std::string out;
  for (const FoundPipeline& p : result.pipelines) {
    out += fmt::format("pipeline \"{}\" ({})\n", p.name.empty() ? "?" : p.name, p.where.ToString());
    for (const FoundStage& s : p.stages) {
      out += fmt::format("  stage \"{}\": op {}", s.name, s.op);
      if (!s.fn.empty()) out += fmt::format(", fn {}", s.fn);
      for (const auto& [knob, value] : StageKnobValues(p, s.name)) out += fmt::format(", {} {}", knob, value);
      out += "\n";
    }
    out += "  knobs:\n";
    for (const KnobSite& k : p.knobs) {
      out += fmt::format("    {}.{} = {}: ", k.stage, k.knob, k.value.value_or("?"));
      if (k.rewritable) {
        out += fmt::format("literal `{}` at {}", k.text, k.literal.ToString());
        if (!k.via.empty()) out += fmt::format(" (constant {})", k.via);
      } else {
        out += fmt::format("not rewritable: {}", k.why);
      }
      out += fmt::format(" [call at {}]\n", k.call.ToString());
    }
  }
  if (result.pipelines.empty()) out += "no pipeline built with pipetune::runtime::PipelineBuilder found\n";
  for (const std::string& w : result.warnings) out += "warning: " + w + "\n";
  return out;
}

std::string FormatFindJson(const FindResult& result) {
  Json doc = Json::object();
  Json pipelines = Json::array();
  for (const FoundPipeline& p : result.pipelines) {
    Json pj = {{"name", p.name}, {"where", p.where.ToString()}};
    Json stages = Json::array();
    for (const FoundStage& s : p.stages) {
      Json sj = {{"name", s.name}, {"op", s.op}};
      if (!s.fn.empty()) sj["fn"] = s.fn;
      for (const auto& [knob, value] : StageKnobValues(p, s.name)) {
        if (value == "?") {
          sj[knob] = nullptr;
        } else if (knob == "location") {
          sj[knob] = value;
        } else if (knob == "random") {
          sj[knob] = value == "true";
        } else {
          sj[knob] = std::stoll(value);
        }
      }
      stages.push_back(std::move(sj));
    }
    pj["stages"] = std::move(stages);
    Json knobs = Json::array();
    for (const KnobSite& k : p.knobs) {
      Json kj = {{"stage", k.stage}, {"knob", k.knob}};
      kj["value"] = k.value ? Json(*k.value) : Json(nullptr);
      kj["rewritable"] = k.rewritable;
      if (k.rewritable) {
        kj["literal"] = k.literal.ToString();
        kj["text"] = k.text;
        if (!k.via.empty()) kj["constant"] = k.via;
      } else {
        kj["why"] = k.why;
      }
      kj["call"] = k.call.ToString();
      knobs.push_back(std::move(kj));
    }
    pj["knobs"] = std::move(knobs);
    pipelines.push_back(std::move(pj));
  }
  doc["pipelines"] = std::move(pipelines);
  doc["warnings"] = result.warnings;
  return doc.dump(2) + "\n";
}

}  // namespace pipetune::rewrite

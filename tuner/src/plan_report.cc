// Plan -> text and JSON (plan_report.h).
#include "pipetune/tuner/plan_report.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "pipetune/base/size.h"

namespace pipetune::tuner {
namespace {

std::string Rate(double x) { return std::isfinite(x) ? fmt::format("{:.4g}/s", x) : "unbounded"; }

std::string Ratio(double after, double before) {
  if (!(before > 0) || !std::isfinite(after)) return "";
  return fmt::format(" (x{:.2f})", after / before);
}

std::string Budgets(const Plan& plan) {
  const Resources& r = plan.resources;
  std::string text = fmt::format("{:.4g} cores", r.cores);
  if (!r.cores_source.empty()) text += fmt::format(" ({})", r.cores_source);
  text += fmt::format(", {} memory", FormatBytes(static_cast<double>(r.memory_bytes)));
  if (!r.memory_source.empty()) text += fmt::format(" ({})", r.memory_source);
  text += fmt::format(", {} threads", r.max_threads);
  if (r.storage_bytes_per_second)
    text += fmt::format(", storage {}/s", FormatBytes(*r.storage_bytes_per_second));
  if (r.disk_cache_dir) text += fmt::format(", disk caches in {}", *r.disk_cache_dir);
  return text;
}

std::string MemoryLine(const Plan& plan) {
  const models::MemoryEstimate& m = plan.memory;
  std::string text = fmt::format(
      "{} of {} (cache {}, prefetch {}, queues {}, in flight {}, state {})", FormatBytes(m.Total()),
      FormatBytes(static_cast<double>(plan.resources.memory_bytes)), FormatBytes(m.cache),
      FormatBytes(m.prefetch), FormatBytes(m.queues), FormatBytes(m.in_flight), FormatBytes(m.state));
  if (m.processes > 0) text += fmt::format("; processes {}", FormatBytes(m.processes));
  if (m.disk > 0) text += fmt::format("; {} on disk", FormatBytes(m.disk));
  return text;
}

std::string KnobTable(const Plan& plan) {
  size_t name_width = 4, old_width = 3, new_width = 3;
  std::vector<std::string> names;
  for (const KnobChange& knob : plan.knobs) {
    bool bare = knob.knob == Knob::kStage || knob.knob == Knob::kNamed;
    names.push_back(bare ? knob.stage : knob.stage + "." + KnobName(knob.knob));
    name_width = std::max(name_width, names.back().size());
    old_width = std::max(old_width, knob.old_value.size());
    new_width = std::max(new_width, knob.new_value.size());
  }
  std::string text = fmt::format("  {:<{}}  {:<{}}  {:<{}}  {}\n", "knob", name_width, "old", old_width,
                                 "new", new_width, "reason");
  for (size_t i = 0; i < plan.knobs.size(); ++i) {
    const KnobChange& knob = plan.knobs[i];
    text += fmt::format("{} {:<{}}  {:<{}}  {:<{}}  {}\n", knob.changed ? '*' : ' ', names[i], name_width,
                        knob.old_value, old_width, knob.new_value, new_width, knob.reason);
  }
  return text;
}

}  // namespace

std::string DescribeDiskCacheHint(const DiskCacheHint& hint) {
  return fmt::format(
      "a cache on disk after \"{}\" would run at {} after its first epoch (x{:.2f} over this plan; "
      "the epoch it holds, {}, does not fit the memory budget of {} beside the buffers): "
      "give --cache-dir DIR",
      hint.after, Rate(hint.throughput), hint.gain, FormatBytes(hint.cache_bytes),
      FormatBytes(static_cast<double>(hint.memory_budget_bytes)));
}

Json DiskCacheHintToJson(const std::optional<DiskCacheHint>& hint) {
  if (!hint) return nullptr;
  return {{"after", hint->after},
          {"predicted_throughput", hint->throughput},
          {"gain", hint->gain},
          {"cache_bytes", hint->cache_bytes},
          {"memory_budget_bytes", hint->memory_budget_bytes},
          {"text", DescribeDiskCacheHint(*hint)}};
}

const char* KnobName(Knob knob) {
  switch (knob) {
    case Knob::kParallelism:
      return "parallelism";
    case Knob::kBuffer:
      return "buffer";
    case Knob::kLocation:
      return "location";
    case Knob::kStage:
      return "stage";
    case Knob::kNamed:
      return "setting";
  }
  return "stage";
}

std::string FormatPlanText(const Plan& plan) {
  std::string text =
      fmt::format("plan for \"{}\" (objective: {})\n", plan.pipeline_name, ObjectiveName(plan.objective));
  text += fmt::format("budgets:    {}\n", Budgets(plan));
  text += fmt::format("throughput: measured {}, predicted {} as traced -> {} tuned{}\n",
                      Rate(plan.measured_throughput), Rate(plan.predicted_throughput_before),
                      Rate(plan.predicted_throughput),
                      Ratio(plan.predicted_throughput, plan.predicted_throughput_before));
  if (plan.demand_throughput) {
    text += fmt::format("demand:     the consumer takes {} ({})\n", Rate(*plan.demand_throughput),
                        plan.demand_met ? "met" : "not met");
  }
  for (const GraphRewrite& rewrite : plan.rewrites) {
    text += fmt::format("rewrite:    {} (x{:.2f} predicted): {}\n", rewrite.description,
                        rewrite.predicted_gain, rewrite.reason);
  }
  text += fmt::format("binds:      {}\n", plan.binding_reason);
  if (plan.disk_cache_hint)
    text += fmt::format("disk cache: {}\n", DescribeDiskCacheHint(*plan.disk_cache_hint));
  text += fmt::format("uses:       {:.2f} cores ({} needed), {} threads, memory {}\n", plan.cores_used,
                      plan.cores_needed, plan.threads, MemoryLine(plan));
  // Not `"\n" + KnobTable(plan)`: GCC 12 at -O3 raises a false -Wrestrict on
  // std::string's insert into a temporary.
  text += '\n';
  text += KnobTable(plan);
  if (!plan.cache_options.empty()) {
    text += "\ncache options:\n";
    for (const CacheOption& option : plan.cache_options) {
      bool chosen = option.chosen;
      if (option.feasible) {
        text += fmt::format("{} {}: {}, {} cores, {}{}\n", chosen ? '*' : ' ', option.description,
                            Rate(option.throughput), option.cores_needed, FormatBytes(option.memory_bytes),
                            option.note.empty() ? "" : "; limited by " + option.note);
      } else {
        text += fmt::format("  {}: {}\n", option.description, option.note);
      }
    }
  }
  if (!plan.notes.empty()) {
    text += "\nnotes:\n";
    for (const std::string& note : plan.notes) text += fmt::format("  - {}\n", note);
  }
  return text;
}

Json PlanToJson(const Plan& plan) {
  auto number = [](double x) { return std::isfinite(x) ? Json(x) : Json(nullptr); };
  Json json = Json::object();
  json["pipeline"] = plan.pipeline_name;
  json["objective"] = ObjectiveName(plan.objective);
  const Resources& r = plan.resources;
  json["budgets"] = {{"cores", r.cores},
                     {"memory_bytes", r.memory_bytes},
                     {"max_threads", r.max_threads},
                     {"storage_bytes_per_second",
                      r.storage_bytes_per_second ? Json(*r.storage_bytes_per_second) : Json(nullptr)},
                     {"disk_cache_dir", r.disk_cache_dir ? Json(*r.disk_cache_dir) : Json(nullptr)}};
  json["measured_throughput"] = number(plan.measured_throughput);
  json["predicted_throughput_before"] = number(plan.predicted_throughput_before);
  json["predicted_throughput"] = number(plan.predicted_throughput);
  json["binding"] = {{"kind", models::BoundKindName(plan.binding)},
                     {"stage", plan.binding_stage ? Json(*plan.binding_stage) : Json(nullptr)},
                     {"reason", plan.binding_reason}};
  json["demand_throughput"] = plan.demand_throughput ? Json(*plan.demand_throughput) : Json(nullptr);
  json["demand_met"] = plan.demand_met;
  json["cores_used"] = plan.cores_used;
  json["cores_needed"] = plan.cores_needed;
  json["threads"] = plan.threads;
  const models::MemoryEstimate& m = plan.memory;
  json["memory"] = {{"total_bytes", m.Total()},     {"queues_bytes", m.queues},
                    {"prefetch_bytes", m.prefetch}, {"in_flight_bytes", m.in_flight},
                    {"state_bytes", m.state},       {"cache_bytes", m.cache},
                    {"disk_bytes", m.disk}};
  if (m.processes > 0) json["memory"]["processes_bytes"] = m.processes;
  if (plan.cache_stage) {
    const PlannedStage& cache = plan.stages[*plan.cache_stage];
    json["cache"] = {
        {"kind", CacheKindName(plan.cache.kind)},
        {"after", *plan.cache_stage > 0 ? Json(plan.stages[*plan.cache_stage - 1].name) : Json(nullptr)},
        {"stage", cache.name}};
  } else {
    json["cache"] = nullptr;
  }
  Json knobs = Json::array();
  for (const KnobChange& k : plan.knobs) {
    knobs.push_back({{"stage", k.stage},
                     {"knob", KnobName(k.knob)},
                     {"old", k.old_value},
                     {"new", k.new_value},
                     {"changed", k.changed},
                     {"reason", k.reason}});
  }
  json["knobs"] = std::move(knobs);
  if (!plan.rewrites.empty()) {  // absent otherwise: plans without one read as before
    Json rewrites = Json::array();
    for (const GraphRewrite& r : plan.rewrites) {
      rewrites.push_back({{"kind", r.kind},
                          {"stages", r.stages},
                          {"description", r.description},
                          {"predicted_gain", number(r.predicted_gain)},
                          {"reason", r.reason}});
    }
    json["rewrites"] = std::move(rewrites);
  }
  Json stages = Json::array();
  for (const PlannedStage& s : plan.stages) {
    Json stage = {{"name", s.name}, {"op", s.op_name}};
    if (s.parallel) stage["parallelism"] = s.parallelism;
    if (s.buffer) stage["buffer"] = *s.buffer;
    if (s.location) stage["location"] = s.location->ConfigValue();
    stage["inserted"] = s.inserted();
    stage["cached"] = s.cached;
    stages.push_back(std::move(stage));
  }
  json["stages"] = std::move(stages);
  json["removed_stages"] = plan.removed_stages;
  Json options = Json::array();
  for (const CacheOption& o : plan.cache_options) {
    options.push_back({{"option", o.description},
                       {"feasible", o.feasible},
                       {"predicted_throughput", o.feasible ? number(o.throughput) : Json(nullptr)},
                       {"cores_needed", o.feasible ? Json(o.cores_needed) : Json(nullptr)},
                       {"memory_bytes", o.feasible ? Json(o.memory_bytes) : Json(nullptr)},
                       {"chosen", o.chosen},
                       {"note", o.note}});
  }
  json["cache_options"] = std::move(options);
  json["disk_cache_hint"] = DiskCacheHintToJson(plan.disk_cache_hint);
  json["notes"] = plan.notes;
  return json;
}

}  // namespace pipetune::tuner

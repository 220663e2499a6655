// Fusing adjacent maps into one stage (fusion.h, ProposeMapFusion).
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>

#include "pipetune/tuner/fusion.h"

namespace pipetune::tuner {
namespace {

using models::Op;

// Where the profile's hand-off cost came from, as the plan says it.
const char* HandoffOrigin(const models::Profile& profile) {
  return profile.handoff_given ? "given with --handoff-ns" : "measured on this host";
}

// The steps a map stage runs: its own function, or a chain's steps.
Json StepsOf(const models::StageConfig& stage) {
  if (stage.fn == "chain" && stage.args.is_object() && stage.args.contains("steps"))
    return stage.args["steps"];
  Json step = {{"fn", stage.fn}};
  if (!stage.args.empty()) step["args"] = stage.args;
  return Json::array({step});
}

// The fused stage's profile: the stages' costs added, one hand-off less per
// boundary removed (never below the costliest stage alone), the last
// stage's output. The separate stages' fitted scaling curves do not compose:
// the fused stage is priced as scaling linearly, like any stage measured at
// one level.
models::StageProfile FusedMaps(const models::Profile& profile, size_t first, size_t last, double handoff) {
  const models::StageProfile& tail = profile.stages[last];
  models::StageProfile fused = profile.stages[first];
  double cpu = 0, latency = 0, measured = 0, costliest_cpu = 0, costliest_latency = 0;
  for (size_t i = first; i <= last; ++i) {
    const models::StageProfile& stage = profile.stages[i];
    cpu += stage.cpu_seconds_per_element;
    latency += stage.latency_seconds;
    measured += stage.measured_latency_seconds;
    costliest_cpu = std::max(costliest_cpu, stage.cpu_seconds_per_element);
    costliest_latency = std::max(costliest_latency, stage.latency_seconds);
    fused.random = fused.random || stage.random;
  }
  const double saved = handoff * static_cast<double>(last - first);
  fused.cpu_seconds_per_element = std::max(cpu - saved, costliest_cpu);
  fused.latency_seconds = std::max(latency - saved, costliest_latency);
  fused.measured_latency_seconds = std::max(measured - saved, costliest_latency);
  TakeOutputOf(tail, fused);
  fused.scaling = models::UslFit{};
  fused.scaling.kind = models::ScalingKind::kLinear;
  return fused;
}

}  // namespace

StatusOr<models::PipelineConfig> FuseMapsInConfig(const models::PipelineConfig& config,
                                                  const std::vector<std::string>& names) {
  std::vector<size_t> indices;
  for (const std::string& name : names) {
    std::optional<size_t> index = config.FindStage(name);
    if (!index || config.stages[*index].op != Op::kMap ||
        (!indices.empty() && *index != indices.back() + 1)) {
      return InvalidInput(fmt::format(
          "the plan fuses the maps {}, which the config does not have one after the other: a plan of another "
          "pipeline?",
          fmt::join(names, ", ")));
    }
    indices.push_back(*index);
  }
  models::PipelineConfig fused = config;
  std::vector<models::StageConfig>& stages = fused.stages;
  models::StageConfig& head = stages[indices.front()];
  Json steps = Json::array();
  for (size_t i : indices) {
    const models::StageConfig& stage = config.stages[i];
    for (const Json& step : StepsOf(stage)) steps.push_back(step);
    head.random = head.random || stage.random;
  }
  head.fn = "chain";
  head.args = Json{{"steps", steps}};
  if (head.raw.is_object()) {
    head.raw["fn"] = "chain";
    head.raw["args"] = head.args;
    if (head.random) head.raw["random"] = true;
  }
  stages.erase(stages.begin() + static_cast<std::ptrdiff_t>(indices.front() + 1),
               stages.begin() + static_cast<std::ptrdiff_t>(indices.back() + 1));
  for (size_t i = 0; i < stages.size(); ++i) stages[i].index = i;
  return fused;
}

std::optional<RewrittenInput> ProposeMapFusion(const TuneInput& input, size_t first, size_t last) {
  const models::Profile& profile = input.profile;
  if (!input.config || !profile.handoff_cpu_seconds || first >= last || last >= profile.stages.size())
    return std::nullopt;
  std::vector<size_t> configs;
  for (size_t i = first; i <= last; ++i) {
    const models::StageProfile& stage = profile.stages[i];
    std::optional<size_t> config = input.config->FindStage(stage.name);
    if (stage.op != Op::kMap || !stage.parallel || stage.group || !config) return std::nullopt;
    if (!(stage.cpu_seconds_per_element > 0)) return std::nullopt;  // unmeasured: nothing to price
    if (!configs.empty() && *config != configs.back() + 1) return std::nullopt;
    const models::StageConfig& one = input.config->stages[*config];
    if (one.on_error != input.config->stages[*input.config->FindStage(profile.stages[first].name)].on_error)
      return std::nullopt;  // the stages would fail elements differently
    configs.push_back(*config);
  }

  std::vector<std::string> names;
  for (size_t i = first; i <= last; ++i) names.push_back(profile.stages[i].name);
  StatusOr<models::PipelineConfig> config = FuseMapsInConfig(*input.config, names);
  if (!config.ok()) return std::nullopt;
  size_t steps = StepsOf(config->stages[*config->FindStage(names.front())]).size();

  RewrittenInput fused{input, {}, {}};
  fused.input.config = std::move(config).value();
  models::Profile& p = fused.input.profile;
  p.stages[first] = FusedMaps(profile, first, last, *profile.handoff_cpu_seconds);
  p.stages.erase(p.stages.begin() + static_cast<std::ptrdiff_t>(first + 1),
                 p.stages.begin() + static_cast<std::ptrdiff_t>(last + 1));
  const size_t removed = last - first;
  for (std::optional<size_t>* index : {&p.storage_stage, &p.cache_stage}) {
    if (*index && **index > last) **index -= removed;
  }

  GraphRewrite& rewrite = fused.rewrite;
  rewrite.kind = kFuseMaps;
  rewrite.stages = names;
  std::string joined;
  for (const std::string& name : names) joined += (joined.empty() ? "\"" : " + \"") + name + "\"";
  rewrite.description =
      fmt::format("{} -> \"{}\": one stage running the {} functions in turn", joined, names.front(), steps);
  rewrite.reason =
      fmt::format("{} hand-off{} of {:.1f} us of CPU each saved per element ({})", removed,
                  removed == 1 ? "" : "s", *profile.handoff_cpu_seconds * 1e6, HandoffOrigin(profile));
  // Two stages only: a fold changes the first one's args, so what a third
  // would fold into is another question.
  const models::StageConfig& head = input.config->stages[configs.front()];
  const models::StageConfig& next = input.config->stages[configs.back()];
  fused.folds =
      removed == 1 && input.folds && head.fn != "chain" && next.fn != "chain" && input.folds(head, next);
  if (fused.folds) {
    rewrite.reason +=
        fmt::format("; \"{}\" ({}) folds into the pass of \"{}\" ({}): the same output in one pass less",
                    next.name, next.fn, head.name, head.fn);
  }
  fused.pricing = fmt::format(
      "{} fused is priced at the stages' measured CPU added, less {} hand-off{} of {:.1f} us ({})", joined,
      removed, removed == 1 ? "" : "s", *profile.handoff_cpu_seconds * 1e6,
      profile.handoff_given ? HandoffOrigin(profile)
                            : "measured on this host: the same work as two stages and as one");
  return fused;
}

}  // namespace pipetune::tuner

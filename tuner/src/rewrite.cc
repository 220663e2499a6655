// Plan -> tuned config (rewrite.h).
#include "pipetune/tuner/rewrite.h"

#include <fmt/format.h>

#include <algorithm>
#include <set>

#include "pipetune/tuner/fusion.h"

namespace pipetune::tuner {
namespace {

using models::Op;

models::StageConfig InsertedStage(const PlannedStage& planned) {
  models::StageConfig stage;
  stage.name = planned.name;
  stage.op = planned.op;
  stage.raw = Json::object();
  stage.raw["name"] = planned.name;
  stage.raw["op"] = models::OpName(planned.op);
  if (planned.op == Op::kPrefetch) stage.buffer = planned.buffer.value_or(1);
  if (planned.op == Op::kCache) stage.location = planned.location.value_or(models::CacheLocation::Memory());
  if (!planned.args.empty()) {
    stage.args = planned.args;
    stage.raw["args"] = planned.args;
  }
  return stage;
}

Status SetKnobs(const PlannedStage& planned, models::StageConfig& stage) {
  if (stage.op != planned.op) {
    return InvalidInput(
        fmt::format("the plan's stage \"{}\" is a {}, the config's a {}: a plan of another pipeline?",
                    planned.name, planned.op_name, models::OpName(stage.op)));
  }
  if (models::OpIsParallel(stage.op)) stage.parallelism = planned.parallelism;
  if (stage.op == Op::kPrefetch && planned.buffer) stage.buffer = planned.buffer;
  if (stage.op == Op::kCache && planned.location) stage.location = planned.location;
  return Status::Ok();
}

}  // namespace

StatusOr<models::PipelineConfig> ApplyPlan(const models::PipelineConfig& config, const Plan& plan) {
  if (!plan.rewrites.empty()) {  // the graph first (fusion.h), then the knobs of the stages it leaves
    PIPETUNE_ASSIGN_OR_RETURN(models::PipelineConfig rewritten, ApplyRewrites(config, plan.rewrites));
    Plan knobs = plan;
    knobs.rewrites.clear();
    return ApplyPlan(rewritten, knobs);
  }
  std::set<std::string> planned_names, removed(plan.removed_stages.begin(), plan.removed_stages.end());
  for (const PlannedStage& planned : plan.stages) planned_names.insert(planned.name);
  for (const models::StageConfig& stage : config.stages) {
    if (!planned_names.count(stage.name) && !removed.count(stage.name)) {
      return InvalidInput(fmt::format(
          "the config has a stage \"{}\" that the plan does not know: a plan of another pipeline?",
          stage.name));
    }
  }
  models::PipelineConfig tuned = config;
  tuned.stages.clear();
  for (const PlannedStage& planned : plan.stages) {
    std::optional<size_t> index = config.FindStage(planned.name);
    if (planned.inserted()) {
      if (index) {
        return InvalidInput(
            fmt::format("the plan inserts a stage \"{}\" but the config already has one", planned.name));
      }
      tuned.stages.push_back(InsertedStage(planned));
    } else {
      if (!index) {
        return InvalidInput(
            fmt::format("the plan has a stage \"{}\" that the config does not: a plan of another pipeline?",
                        planned.name));
      }
      models::StageConfig stage = config.stages[*index];
      PIPETUNE_RETURN_IF_ERROR(SetKnobs(planned, stage));
      tuned.stages.push_back(std::move(stage));
    }
    tuned.stages.back().index = tuned.stages.size() - 1;
  }
  PIPETUNE_RETURN_IF_ERROR(models::Validate(tuned).WithContext("the tuned config does not validate"));
  return tuned;
}

}  // namespace pipetune::tuner

#include "traced_run.h"

#include <fmt/format.h>

namespace pipetune::bench {

Status SetKnob(models::PipelineConfig& config, const std::string& assignment) {
  size_t dot = assignment.find('.');
  size_t equals = assignment.find('=');
  if (dot == std::string::npos || equals == std::string::npos || equals < dot) {
    return InvalidInput(fmt::format("\"{}\": expected STAGE.KNOB=VALUE", assignment));
  }
  std::string stage_name = assignment.substr(0, dot);
  std::string knob = assignment.substr(dot + 1, equals - dot - 1);
  std::optional<size_t> index = config.FindStage(stage_name);
  if (!index) return InvalidInput(fmt::format("\"{}\": no stage \"{}\"", assignment, stage_name));
  int value = std::stoi(assignment.substr(equals + 1));
  models::StageConfig& stage = config.stages[*index];
  if (knob == "parallelism") {
    stage.parallelism = value;
  } else if (knob == "buffer") {
    stage.buffer = value;
  } else {
    return InvalidInput(fmt::format("\"{}\": knob must be parallelism or buffer", assignment));
  }
  return models::Validate(config);
}

void MakeEndless(models::PipelineConfig& config) {
  if (config.stages.empty() || config.stages[0].op != models::Op::kRange) return;
  for (const models::StageConfig& stage : config.stages) {
    // A repeat or cache needs the source's epoch to end.
    if (stage.op == models::Op::kRepeat || stage.op == models::Op::kCache) return;
  }
  models::StageConfig& source = config.stages[0];
  source.args.erase("count");
  if (source.raw.contains("args") && source.raw["args"].is_object()) source.raw["args"].erase("count");
}

}  // namespace pipetune::bench

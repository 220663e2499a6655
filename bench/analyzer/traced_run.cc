#include "traced_run.h"

#include <fmt/format.h>

#include "pipetune/tracer/tracer.h"

namespace pipetune::bench {

StatusOr<runtime::RunSummary> RunTraced(const models::PipelineConfig& config,
                                        const TracedRunOptions& options) {
  tracer::SessionOptions session;
  session.path = options.trace_path;
  session.pipeline_name = config.name;
  session.config_json = models::Serialize(config);
  session.snapshot_interval_ms = options.snapshot_interval_ms;
  session.spans_per_stage_per_second = options.spans_per_stage_per_second;
  session.consumer_steps_per_second = options.consumer_steps_per_second;
  PIPETUNE_RETURN_IF_ERROR(tracer::Start(session));
  runtime::RunOptions run;
  run.max_seconds = options.seconds;
  run.base_dir = options.base_dir;
  StatusOr<runtime::RunSummary> summary = runtime::RunPipeline(config, run);
  Status stopped = tracer::Stop();
  if (!summary.ok()) return summary.status();
  if (!stopped.ok()) return stopped;
  return summary;
}

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

#include "pipetune/workflow/run.h"

#include <filesystem>
#include <utility>

#include "pipetune/tracer/tracer.h"

namespace pipetune::workflow {

std::string DirectoryOf(const std::string& path) {
  std::filesystem::path parent = std::filesystem::path(path).parent_path();
  return parent.empty() ? std::string(".") : parent.string();
}

RunConfigOptions TracedRunOptions(double seconds, const std::string& trace_path,
                                  const runtime::FunctionRegistry* registry,
                                  std::function<void(const runtime::Progress&)> on_progress) {
  RunConfigOptions options;
  options.seconds = seconds;
  options.trace_path = trace_path;
  options.registry = registry;
  options.on_progress = std::move(on_progress);
  return options;
}

StatusOr<runtime::RunSummary> RunConfig(const models::PipelineConfig& config,
                                        const RunConfigOptions& options) {
  bool traced = !options.trace_path.empty();
  if (traced) {
    tracer::SessionOptions session;
    session.path = options.trace_path;
    session.pipeline_name = config.name;
    session.config_json = models::Serialize(config);
    session.snapshot_interval_ms = options.snapshot_interval_ms;
    session.spans_per_stage_per_second = options.spans_per_stage_per_second;
    session.consumer_steps_per_second = options.consumer_steps_per_second;
    session.config_path = options.config_path;
    PIPETUNE_RETURN_IF_ERROR(tracer::Start(session).WithContext("cannot start the trace"));
  }
  runtime::RunOptions run;
  run.max_seconds = options.seconds;
  run.base_dir = !options.base_dir.empty()      ? options.base_dir
                 : !options.config_path.empty() ? DirectoryOf(options.config_path)
                                                : std::string();
  run.registry = options.registry;
  run.deterministic = options.deterministic;
  run.on_progress = options.on_progress;
  run.interrupt = options.interrupt;
  run.progress_interval_s = options.progress_interval_s;
  run.resizable_workers = options.resizable_workers;
  run.on_start = options.on_start;
  StatusOr<runtime::RunSummary> summary = runtime::RunPipeline(config, run);
  if (!traced) return summary;
  Status closed = tracer::Stop();
  if (!summary.ok()) return summary.status();
  if (!closed.ok()) return closed.WithContext(options.trace_path);
  return summary;
}

StatusOr<runtime::RunSummary> RunConfigFile(const std::string& config_path, RunConfigOptions options) {
  PIPETUNE_ASSIGN_OR_RETURN(models::PipelineConfig config, models::LoadConfig(config_path));
  options.config_path = config_path;
  return RunConfig(config, options);
}

}  // namespace pipetune::workflow

#include "pipetune/workflow/autotune.h"

#include <fmt/format.h>

#include <utility>

#include "pipetune/workflow/run.h"

namespace pipetune::workflow {
namespace {

// How often the run's monitor steps the controller.
constexpr double kTickSeconds = 0.25;

}  // namespace

StatusOr<AutotuneResult> Autotune(const AutotuneRequest& request) {
  if (!(request.seconds > 0))
    return InvalidInput(fmt::format("--seconds: must be > 0, got {}", request.seconds));
  PIPETUNE_RETURN_IF_ERROR(ValidateControllerOptions(request));
  PIPETUNE_ASSIGN_OR_RETURN(models::PipelineConfig config, models::LoadConfig(request.config_path));
  std::string output = request.output.empty() ? AutotunedConfigPath(request.config_path) : request.output;
  std::string trace_path = request.trace_path.empty() ? output + ".ptrace" : request.trace_path;

  AutotuneController controller(request, config, trace_path, request.config_path);
  RunConfigOptions run =
      TracedRunOptions(request.seconds, trace_path, request.registry,
                       [&](const runtime::Progress& progress) { controller.Step(progress.seconds); });
  run.config_path = request.config_path;
  run.interrupt = request.interrupt;
  run.progress_interval_s = kTickSeconds;
  run.resizable_workers = ResizableWorkers(request.budgets);
  run.on_start = [&](runtime::Pipeline& pipeline) { controller.Attach(&pipeline, config); };
  StatusOr<runtime::RunSummary> summary = RunConfig(config, run);
  controller.Attach(nullptr, {});  // the run's pipeline is gone
  if (!summary.ok()) return summary.status();
  controller.Finish();
  PIPETUNE_ASSIGN_OR_RETURN(
      TunedConfig written,
      WriteTunedConfig(config, controller.SettledOn(config), DirectoryOf(request.config_path),
                       request.config_path, output, /*with_diff=*/true));
  AutotuneResult result;
  static_cast<AutotuneStats&>(result) = controller.TakeStats();
  result.summary = std::move(*summary);
  result.written = std::move(written);
  result.trace_path = trace_path;
  return result;
}

}  // namespace pipetune::workflow

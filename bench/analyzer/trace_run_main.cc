// pipetune_trace_run: runs a pipeline config traced, with a smaller span
// budget than `pipetune run` so that the trace stays small. Used to make the
// golden traces of tests/cli/golden (see its README.md).
//
//   pipetune_trace_run CONFIG --seconds 4 --trace out.trace [--spans 20] [--steps 1000]
//                      [--interval-ms 100] [--set decode.parallelism=2]... [--endless]
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <filesystem>

#include "pipetune/workflow/run.h"
#include "traced_run.h"

int main(int argc, char** argv) {
  using namespace pipetune;
  CLI::App app{"Run a pipeline config traced (small traces for tests and benchmarks)"};
  std::string config_path;
  workflow::RunConfigOptions options;
  options.seconds = 5;
  options.spans_per_stage_per_second = bench::kBenchSpansPerStagePerSecond;
  std::vector<std::string> knobs;
  bool endless = false;
  app.add_option("config", config_path)->required();
  app.add_option("--seconds", options.seconds);
  app.add_option("--trace", options.trace_path)->required();
  app.add_option("--spans", options.spans_per_stage_per_second, "sampled spans per stage per second");
  app.add_option("--interval-ms", options.snapshot_interval_ms);
  app.add_option("--steps", options.consumer_steps_per_second, "consumer steps recorded per second");
  app.add_option("--set", knobs, "STAGE.parallelism=N or STAGE.buffer=N")->allow_extra_args(false);
  app.add_flag("--endless", endless, "drop a range source's count");
  CLI11_PARSE(app, argc, argv);

  StatusOr<models::PipelineConfig> config = models::LoadConfig(config_path);
  if (!config.ok()) {
    fmt::print(stderr, "error: {}\n", config.status().message());
    return 2;
  }
  for (const std::string& knob : knobs) {
    Status set = bench::SetKnob(*config, knob);
    if (!set.ok()) {
      fmt::print(stderr, "error: {}\n", set.message());
      return 2;
    }
  }
  if (endless) bench::MakeEndless(*config);
  options.config_path = config_path;
  StatusOr<runtime::RunSummary> summary = workflow::RunConfig(*config, options);
  if (!summary.ok()) {
    fmt::print(stderr, "error: {}\n", summary.status().message());
    return 2;
  }
  fmt::print("{}: {:.1f} outputs/s over {:.1f} s, stall {:.0f}%; trace {}\n", config->name,
             summary->throughput, summary->seconds, 100 * summary->stall_fraction, options.trace_path);
  return 0;
}

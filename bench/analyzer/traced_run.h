// Running a pipeline config under the tracer with chosen session options:
// what the analyzer benchmarks and the golden-trace maker share.
#pragma once

#include <cstdint>
#include <string>

#include "pipetune/base/status.h"
#include "pipetune/models/config.h"
#include "pipetune/runtime/pipeline.h"

namespace pipetune::bench {

struct TracedRunOptions {
  double seconds = 5;
  std::string trace_path;
  uint32_t spans_per_stage_per_second = 20;  // fewer than `pipetune run`: small traces
  uint32_t snapshot_interval_ms = 100;
  uint32_t consumer_steps_per_second = 1000;
  std::string base_dir;  // where relative paths in the config resolve
};

StatusOr<runtime::RunSummary> RunTraced(const models::PipelineConfig& config,
                                        const TracedRunOptions& options);

// "decode.parallelism=3" or "prefetch.buffer=4": changes one knob.
Status SetKnob(models::PipelineConfig& config, const std::string& assignment);

// Drops the `count` of a range source, so that a timed run never runs dry;
// not when a repeat or cache needs the epoch to end.
void MakeEndless(models::PipelineConfig& config);

}  // namespace pipetune::bench

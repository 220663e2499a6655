// What the analyzer benchmarks and the golden-trace maker share besides
// workflow::RunConfig: knob edits on the command line, endless sources.
#pragma once

#include <cstdint>
#include <string>

#include "pipetune/base/status.h"
#include "pipetune/models/config.h"

namespace pipetune::bench {

// Sampled spans per stage per second in benchmark traces: fewer than
// `pipetune run` records, so that golden traces stay small. Traced runs
// themselves go through workflow::RunConfig.
inline constexpr uint32_t kBenchSpansPerStagePerSecond = 20;

// "decode.parallelism=3" or "prefetch.buffer=4": changes one knob.
Status SetKnob(models::PipelineConfig& config, const std::string& assignment);

// Drops the `count` of a range source, so that a timed run never runs dry;
// not when a repeat or cache needs the epoch to end.
void MakeEndless(models::PipelineConfig& config);

}  // namespace pipetune::bench

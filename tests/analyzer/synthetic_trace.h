// Feeds a TraceCollector the records a run of known costs would produce, so
// that analyzer tests need no runtime and no trace file.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "pipetune/analyzer/collector.h"

namespace pipetune::analyzer::testing {

struct SyntheticStage {
  std::string name;
  std::string op;
  uint32_t parallelism = 1;
  double visit_ratio = 1;  // elements produced per pipeline output
  double consumed_per_element = 1;
  double cpu_seconds = 0;   // per element
  double wall_seconds = 0;  // own work per element per worker
  double bytes = 1000;      // per element
  // Stops producing at this time (the stage before a cache); < 0: never.
  double stop_seconds = -1;
};

struct SyntheticRun {
  std::string name = "synthetic";
  std::string config_json;  // the header's config; empty: none
  std::vector<SyntheticStage> stages;
  double seconds = 10;
  double start_seconds = 1;  // nothing flows before (the warm-up)
  double throughput = 100;   // pipeline outputs per second once flowing
  double step_seconds = 0;   // consumer step (0: it drains)
  double cores = 2;
  double other_cpu_cores = 0.01;
  uint32_t snapshot_interval_ms = 100;
  uint64_t dropped_spans = 0;
  double consumer_stop_seconds = -1;  // the consumer takes nothing after this; < 0: never
};

// Runs the whole synthetic trace through a collector and finishes it.
CollectedTrace Collect(const SyntheticRun& run, const tracer::ReadReport& report = {});

}  // namespace pipetune::analyzer::testing

// A DataLoader run over time: its processes' traces (the main process's
// and each worker's) put on one clock and summed, stage by stage, into the
// frames a config's trace is collected into (collector.h). The one
// Timeline() (timeline.h) then draws a DataLoader's time charts as it draws
// a config's.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "pipetune/analyzer/collector.h"
#include "pipetune/tracer/reader.h"

namespace pipetune::analyzer::internal {

struct DataLoaderTimelineStage {
  std::string name;          // as the profile names it: "load", "transform[0]:Spin", "collate", ...
  uint32_t parallelism = 1;  // the processes that run it side by side
};

// Frames at each of the main process's snapshots, times since its session
// started, with `stages` in their order and the consumer (the DataLoader's
// `next` and `step` stages) as the consumer's steps. A stage's counts at a
// frame are the sum over the processes that ran it of each one's latest
// snapshot at or before that time: the main trace's stage `prefix` + name
// (its samples at num_workers=0, the transfer, the pin thread) and each
// worker trace's stage `name`. Workers snapshot on their own ticks, so their
// counts lag by up to one snapshot interval. A call reaches the counters
// when it returns; the calls recorded as spans that are still running at a
// frame add the time they have run so far to its work (and `next`'s to the
// consumer's wait), so that a long call is spread over the frames it
// covered instead of landing whole where it ended. The process CPU is every
// process's; the RSS counts a process up to its last sample. Workers on
// another clock than the main process's (another host) are placed through
// both sessions' wall-clock starts.
CollectedTrace MergeDataLoaderTimeline(const tracer::Trace& main, const std::string& prefix,
                                       const std::vector<const tracer::Trace*>& workers,
                                       const std::vector<DataLoaderTimelineStage>& stages);

}  // namespace pipetune::analyzer::internal

// The timeline charts' points (Diagnosis::timeline), from a collected
// trace's frames. One function for every pipeline: a config's run feeds it
// the frames its trace was collected into, a DataLoader run the frames its
// processes' traces were merged into (dataloader_timeline.h).
#pragma once

#include <vector>

#include "pipetune/analyzer/collector.h"
#include "pipetune/analyzer/diagnosis.h"

namespace pipetune::analyzer::internal {

// One point per stretch of frames holding about 8 outputs on average (at
// most 240 points, at least 20 where there are frames enough). The
// throughput counts the consumer's steps, or the last stage's outputs when
// there is no consumer; a stage's busy share divides its work by the
// stretch times its parallelism. Fewer than two frames: no points.
std::vector<TimelinePoint> Timeline(const CollectedTrace& trace);

}  // namespace pipetune::analyzer::internal

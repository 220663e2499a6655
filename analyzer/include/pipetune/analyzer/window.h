// The steady window of a run, and the model's measurement over it.
//
// Window rule (docs/model.md has the reasoning):
//  - start after the warm-up: the first 10% of the run, and at least the
//    first second or a quarter of the run, whichever is shorter; never before
//    the consumer's first step;
//  - when a stage's parallelism changed during the run, start at its last
//    change (the earlier stretches become scaling points);
//  - with a cache stage whose first epoch completed, start once it did (the
//    stages before it then stop working); when that leaves too little of the
//    run, the window is the first epoch instead and says so;
//  - end at the last snapshot where the consumer still took outputs;
//  - too short a run for all that: the whole run, with a note.
#pragma once

#include <cstddef>
#include <optional>
#include <string>

#include "pipetune/analyzer/collector.h"
#include "pipetune/models/config.h"
#include "pipetune/models/profile.h"

namespace pipetune::analyzer {

struct Window {
  size_t begin_frame = 0;  // indices into CollectedTrace::frames
  size_t end_frame = 0;
  double begin_seconds = 0;
  double end_seconds = 0;
  bool cache_filled = false;
  std::string reason;  // one sentence: why these bounds
};

// Chooses the window. `config` (may be null) says where a cache sits.
// Errors (kInvalidInput): fewer than two snapshots in the whole trace.
StatusOr<Window> SelectWindow(const CollectedTrace& trace, const models::PipelineConfig* config);

// The counters' differences between the window's frames, for MakeProfile.
// Stages are in registration order. Scaling points from stretches of the
// trace where a stage ran at another parallelism are added to its stage.
models::WindowMeasurement MeasureWindow(const CollectedTrace& trace, const Window& window,
                                        const models::PipelineConfig* config);

}  // namespace pipetune::analyzer

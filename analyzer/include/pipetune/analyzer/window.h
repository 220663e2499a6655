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
//
// Whatever the kind of run, its prediction is judged against the rate
// measured over its window only when the window is long enough to hold a
// rate (JudgeWindow); the report says so otherwise.
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

// Whether a window of `seconds` holding `outputs` can judge a prediction: at
// least 2 s and 20 outputs. Shorter, the measured rate is a count over a
// few snapshots: a sampled recorder's counts lag by up to its interval (a
// tf.data run's 50 to 100 ms), an epoch's start falls in the window or out
// of it, and the ratio moves by tens of percent from run to run. `why` then
// says so, for the window line.
struct PredictionJudgement {
  bool judged = true;
  std::string why;  // empty when judged
};
PredictionJudgement JudgeWindow(double seconds, double outputs);

// The counters' differences between the window's frames, for MakeProfile.
// Stages are in registration order. Scaling points from stretches of the
// trace where a stage ran at another parallelism are added to its stage.
models::WindowMeasurement MeasureWindow(const CollectedTrace& trace, const Window& window,
                                        const models::PipelineConfig* config);

}  // namespace pipetune::analyzer

// The two peer algorithms of the tuner quality benchmark, implemented on the
// same model inputs as pipetune's solver (a Profile and the budgets) and
// producing the same kind of plan, so that one rewriter turns every plan into
// a config that runs on our runtime. Baselines for measurement, not features.
//
// Plumber (Kuchnik et al., MLSys 2022), as its paper describes its policy:
//  - parallelism: a linear program over cores, each stage's rate per core
//    taken as linear in the cores it gets (its CPU time per output; wall
//    latency plays no part); sequential stages get at most one core; the
//    fractional allocation is rounded up (ceil);
//  - prefetch at the root (the end of the pipeline), sized by operational
//    analysis: Little's law over the pipeline, buffer = ceil(X * R) where R is
//    the time one output spends in the stages at the planned parallelism;
//  - cache at the highest admissible node (the latest stage before the first
//    random one) whose materialised epoch is below 0.9 x free memory (the
//    memory budget); other buffers are not counted.
//
// tf.data AUTOTUNE, HILL_CLIMB: every knob (map / read_file parallelism,
// prefetch buffers; a prefetch is injected at the end, as tf.data does) at
// its minimum; repeatedly add 1 to the knob that most reduces the modelled
// output time; stop when no knob reduces it, when the total parallelism
// would exceed the CPU budget, or when the buffered bytes would exceed the
// RAM budget. The modelled output time is tf.data's: each stage's time per
// element (its latency over its parallelism, no CPU contention), the slowest
// one sets the pipeline's, and the consumer waits on the last buffer per the
// M/M/1/K formula of tf.data's model (ComputeWaitTime). No caching.
#pragma once

#include "pipetune/base/status.h"
#include "pipetune/tuner/candidate.h"
#include "pipetune/tuner/plan.h"

namespace pipetune::bench {

StatusOr<tuner::Plan> PlumberPlan(const tuner::TuneInput& input, const tuner::Resources& resources);
StatusOr<tuner::Plan> AutotunePlan(const tuner::TuneInput& input, const tuner::Resources& resources);

// tf.data's expected consumer wait per element for a producer taking
// `producer_seconds` per element, a consumer taking `consumer_seconds`, and a
// buffer of `buffer` elements between them (exposed for its unit test).
double AutotuneWaitTime(double producer_seconds, double consumer_seconds, double buffer);

}  // namespace pipetune::bench

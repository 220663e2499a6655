// Tuning a profile with worker groups (a PyTorch DataLoader: num_workers,
// prefetch_factor, persistent_workers, pin_memory), by the one rate model.
//
// The search is exhaustive over the group's settings, which are few: workers
// 0 (when the group may run on the consumer's thread) to max_workers, each
// worker's buffer 1 to kMaxWorkerBuffer, persistence, and switchable stages
// off where the profile allows it. Each setting is priced by models::Predict
// (throughput, start-up included) and models::WorkerMemoryBytes; a plan never
// exceeds the memory budget, and the cores bound is part of the prediction.
// Ties within tie_tolerance go to fewer workers, then the traced buffer (or
// the least above it that fits), and the traced persistence: a change the
// model cannot tell from no change is not made. The one exception is a
// stage the profile may switch off (pin_memory without a GPU): it only costs
// time, so it is switched off wherever that is no slower.
//
// Objectives: kMax, the highest throughput; kDemand, the fewest workers that
// reach the consumer's demand (the highest throughput when none does).
#pragma once

#include "pipetune/base/status.h"
#include "pipetune/tuner/plan.h"

namespace pipetune::tuner {

inline constexpr int kMaxWorkerBuffer = 8;

struct WorkerGroupOptions {
  int max_workers = 32;
  double tie_tolerance = 0.01;
};

// kInvalidInput: the profile has no worker group; budgets <= 0; not even the
// least memory setting fits (the message says what it needs).
StatusOr<Plan> SolveWorkerGroups(const TuneInput& input, const Resources& resources, Objective objective,
                                 const WorkerGroupOptions& options = {});

}  // namespace pipetune::tuner

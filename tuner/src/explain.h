// One line of reason per knob of a plan, in the user's words, the binding
// reason, and the notes a plan's numbers need (a worker group's start-up,
// a budget that binds). Private to the tuner: the solver fills what it knows
// into ExplainFacts and calls ExplainPlan on the plan PlanFromCandidate built,
// for every plan.
#pragma once

#include <map>
#include <string>

#include "pipetune/models/queue_model.h"
#include "pipetune/tuner/candidate.h"
#include "pipetune/tuner/plan.h"

namespace pipetune::tuner {

struct ExplainFacts {
  double throughput = 0;                        // X the plan reaches (steady state)
  double sized_for = 0;                         // the X parallelism was sized for (headroom included)
  std::string limit;                            // what stops X going higher (the search's words)
  std::map<std::string, int> fill_parallelism;  // cached stages: the uncached plan's workers
  models::PrefetchSizing last_buffer;           // the queue model's answer for the last prefetch
  bool last_buffer_capped_by_memory = false;
  std::optional<std::string> moved_cache_reason;
  // Worker groups: the best throughput of the settings over the memory
  // budget, and of those within it but over the thread limit; the
  // explainer names a budget as binding when its figure beats the plan's.
  double over_memory_throughput = 0;
  double over_threads_throughput = 0;
  // A group with a worker limit (a stream's shards): the best throughput
  // within the budgets of the settings past it, were their workers all
  // given work, and the fewest workers that reach it; 0 when none beats
  // the limited ones.
  double past_worker_limit_throughput = 0;
  int past_worker_limit_workers = 0;
  double tie_tolerance = 0;
};

void ExplainPlan(const TuneInput& input, const Resources& resources, const Candidate& candidate,
                 const ExplainFacts& facts, Plan& plan);

}  // namespace pipetune::tuner

// Writing a plan for people (text) and for programs (JSON).
//
// JSON fields: pipeline, objective, budgets {cores, memory_bytes,
// max_threads, storage_bytes_per_second, disk_cache_dir}, measured_throughput,
// predicted_throughput_before, predicted_throughput, binding {kind, stage,
// reason}, demand_throughput, demand_met, cores_used, cores_needed, threads,
// memory {total_bytes, queues_bytes, prefetch_bytes, in_flight_bytes,
// state_bytes, cache_bytes, disk_bytes}, cache {kind, after, stage} or null,
// knobs [{stage, knob, old, new, changed, reason}], stages [{name, op,
// parallelism, buffer, location, inserted, cached}], removed_stages,
// cache_options [{option, feasible, predicted_throughput, cores_needed,
// memory_bytes, note}], notes.
#pragma once

#include <string>

#include "pipetune/models/config.h"
#include "pipetune/tuner/plan.h"

namespace pipetune::tuner {

std::string FormatPlanText(const Plan& plan);
Json PlanToJson(const Plan& plan);

}  // namespace pipetune::tuner

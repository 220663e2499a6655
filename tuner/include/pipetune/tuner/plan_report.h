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
// memory_bytes, note}], disk_cache_hint {after, predicted_throughput, gain,
// cache_bytes, memory_budget_bytes, text} or null (plan.h, DiskCacheHint:
// set only without --cache-dir), notes.
#pragma once

#include <optional>
#include <string>

#include "pipetune/models/config.h"
#include "pipetune/tuner/plan.h"

namespace pipetune::tuner {

std::string FormatPlanText(const Plan& plan);
Json PlanToJson(const Plan& plan);

// The hint's one line ("a cache on disk after ... give --cache-dir DIR"), and
// its JSON object (null without one), for every writer that shows a plan.
std::string DescribeDiskCacheHint(const DiskCacheHint& hint);
Json DiskCacheHintToJson(const std::optional<DiskCacheHint>& hint);

}  // namespace pipetune::tuner

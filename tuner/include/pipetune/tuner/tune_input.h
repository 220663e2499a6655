// The budgets a plan must respect, resolved from flags, the config's
// `resources` and the limits of the host the trace recorded, in that order
// of precedence. (Reading traces into a TuneInput is workflow's: the tuner
// sees only models' types.)
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "pipetune/base/status.h"
#include "pipetune/tuner/plan.h"

namespace pipetune::tuner {

// What the traced host allowed the run (the trace header's host facts, as
// plain numbers: the tuner sees no trace type). 0 / -1: unknown.
struct HostLimits {
  double cores = 0;
  int64_t memory_bytes = -1;
};

// Budgets the user gave on the command line; unset ones fall back.
struct BudgetFlags {
  std::optional<double> cores;
  std::optional<uint64_t> memory_bytes;
  std::optional<int> max_threads;
  std::optional<std::string> disk_cache_dir;
  std::optional<uint64_t> disk_free_bytes;
  bool no_cache = false;  // --no-cache (Resources::caches_allowed)
};

// Share of the host's available memory the default budget takes (the rest is
// the process itself and whatever else runs).
inline constexpr double kDefaultMemoryShare = 0.9;

// cores: flag, else config resources.cores, else the host's usable cores;
// memory: flag, else resources.memory, else 90% of the host's usable memory
// (cgroup limit or MemAvailable). kInvalidInput when none is known.
StatusOr<Resources> ResolveResources(const TuneInput& input, const HostLimits& host,
                                     const BudgetFlags& flags);

}  // namespace pipetune::tuner

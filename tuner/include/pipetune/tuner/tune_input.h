// From traces to what the solver needs: the profile (through the analyzer),
// the config as it ran, the spread of output arrivals, and the budgets,
// resolved from flags, the config's `resources` and the host facts the trace
// recorded, in that order of precedence.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "pipetune/analyzer/collector.h"
#include "pipetune/base/status.h"
#include "pipetune/tracer/records.h"
#include "pipetune/tuner/plan.h"

namespace pipetune::tuner {

struct TracedRun {
  TuneInput input;
  tracer::HostFacts host;   // from the first trace's header
  std::string config_path;  // absolute path of the config the run read; empty when unknown
};

// Profiles traces already read (the tuner itself reads no files; the
// workflow's CollectProfile reads them): the main trace is profiled, the
// others add scaling points. The output spread is the index of dispersion of
// consumer steps per snapshot interval over the steady window. Errors are the
// analyzer's.
StatusOr<TracedRun> MakeTracedRun(const analyzer::TraceSet& traces);

// Budgets the user gave on the command line; unset ones fall back.
struct BudgetFlags {
  std::optional<double> cores;
  std::optional<uint64_t> memory_bytes;
  std::optional<int> max_threads;
  std::optional<std::string> disk_cache_dir;
  std::optional<uint64_t> disk_free_bytes;
};

// Share of the host's available memory the default budget takes (the rest is
// the process itself and whatever else runs).
inline constexpr double kDefaultMemoryShare = 0.9;

// cores: flag, else config resources.cores, else the host's usable cores;
// memory: flag, else resources.memory, else 90% of the host's usable memory
// (cgroup limit or MemAvailable). kInvalidInput when none is known.
StatusOr<Resources> ResolveResources(const TuneInput& input, const tracer::HostFacts& host,
                                     const BudgetFlags& flags);

}  // namespace pipetune::tuner

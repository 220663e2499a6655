// Traces -> TuneInput, and the budgets (tune_input.h).
#include "pipetune/tuner/tune_input.h"

#include <fmt/format.h>

#include "pipetune/analyzer/collector.h"
#include "pipetune/analyzer/diagnosis.h"
#include "pipetune/models/queue_model.h"

namespace pipetune::tuner {
namespace {

// Outputs per snapshot interval over the window: what the queue model reads
// the spread of arrivals from.
std::optional<models::ArrivalSpread> OutputSpread(const analyzer::CollectedTrace& trace,
                                                  const analyzer::Window& window) {
  std::vector<double> counts;
  for (size_t f = window.begin_frame + 1; f <= window.end_frame && f < trace.frames.size(); ++f) {
    counts.push_back(static_cast<double>(trace.frames[f].steps - trace.frames[f - 1].steps));
  }
  return models::SpreadFromCounts(counts);
}

}  // namespace

StatusOr<TracedRun> MakeTracedRun(const analyzer::TraceSet& traces) {
  PIPETUNE_ASSIGN_OR_RETURN(analyzer::ProfiledRun run, analyzer::ProfileCollected(traces.main, traces.extra));
  TracedRun traced;
  traced.host = traces.main.header.host;
  traced.config_path = traces.main.pipeline.config_path;
  traced.input.output_spread = OutputSpread(traces.main, run.window);
  traced.input.profile = std::move(run.profile);
  traced.input.config = std::move(run.config);
  return traced;
}

StatusOr<Resources> ResolveResources(const TuneInput& input, const tracer::HostFacts& host,
                                     const BudgetFlags& flags) {
  Resources resources;
  const models::Resources* configured = input.config ? &input.config->resources : nullptr;
  if (flags.cores) {
    resources.cores = *flags.cores;
    resources.cores_source = "--cores";
  } else if (configured != nullptr && configured->cores) {
    resources.cores = *configured->cores;
    resources.cores_source = "the config's resources";
  } else if (host.UsableCores() > 0) {
    resources.cores = host.UsableCores();
    resources.cores_source = "the traced host";
  } else if (input.profile.cores > 0) {
    resources.cores = input.profile.cores;
    resources.cores_source = "the profile";
  }
  if (!(resources.cores > 0)) return InvalidInput("the core budget is unknown: give --cores");

  if (flags.memory_bytes) {
    resources.memory_bytes = *flags.memory_bytes;
    resources.memory_source = "--memory";
  } else if (configured != nullptr && configured->memory_bytes) {
    resources.memory_bytes = *configured->memory_bytes;
    resources.memory_source = "the config's resources";
  } else if (host.UsableMemoryBytes() > 0) {
    resources.memory_bytes =
        static_cast<uint64_t>(kDefaultMemoryShare * static_cast<double>(host.UsableMemoryBytes()));
    resources.memory_source =
        fmt::format("{:.0f}% of the traced host's available memory", kDefaultMemoryShare * 100);
  }
  if (resources.memory_bytes == 0) return InvalidInput("the memory budget is unknown: give --memory");

  if (flags.max_threads) resources.max_threads = *flags.max_threads;
  if (configured != nullptr && configured->storage_bytes_per_second) {
    resources.storage_bytes_per_second = configured->storage_bytes_per_second;
  }
  resources.disk_cache_dir = flags.disk_cache_dir;
  resources.disk_free_bytes = flags.disk_free_bytes;
  return resources;
}

}  // namespace pipetune::tuner

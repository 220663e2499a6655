// The budgets (tune_input.h).
#include "pipetune/tuner/tune_input.h"

#include <fmt/format.h>

namespace pipetune::tuner {
StatusOr<Resources> ResolveResources(const TuneInput& input, const HostLimits& host,
                                     const BudgetFlags& flags) {
  Resources resources;
  const models::Resources* configured = input.config ? &input.config->resources : nullptr;
  if (flags.cores) {
    resources.cores = *flags.cores;
    resources.cores_source = "--cores";
  } else if (configured != nullptr && configured->cores) {
    resources.cores = *configured->cores;
    resources.cores_source = "the config's resources";
  } else if (host.cores > 0) {
    resources.cores = host.cores;
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
  } else if (host.memory_bytes > 0) {
    resources.memory_bytes =
        static_cast<uint64_t>(kDefaultMemoryShare * static_cast<double>(host.memory_bytes));
    resources.memory_source =
        fmt::format("{:.0f}% of the traced host's available memory", kDefaultMemoryShare * 100);
  }
  if (resources.memory_bytes == 0) return InvalidInput("the memory budget is unknown: give --memory");

  if (flags.max_threads) resources.max_threads = *flags.max_threads;
  if (configured != nullptr && configured->storage_bytes_per_second) {
    resources.storage_bytes_per_second = configured->storage_bytes_per_second;
  }
  resources.disk_cache_dir = flags.disk_cache_dir;
  resources.caches_allowed = !flags.no_cache;
  resources.disk_free_bytes = flags.disk_free_bytes;
  return resources;
}

}  // namespace pipetune::tuner

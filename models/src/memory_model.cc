// Bytes held by a pipeline's buffers and caches (memory_model.h).
#include "pipetune/models/memory_model.h"

#include <algorithm>

namespace pipetune::models {

double DefaultQueueBytes(double bytes_per_element) {
  double bytes = std::max(0.0, bytes_per_element);
  // Full at 128 elements, or at 4 MiB once it holds one: the element that
  // crosses the byte limit is still let in.
  return std::min(kQueueMaxElements * bytes, kQueueMaxBytes + bytes);
}

MemoryEstimate EstimateMemory(const std::vector<StageMemoryInput>& stages) {
  MemoryEstimate estimate;
  for (const StageMemoryInput& stage : stages) {
    double out = std::max(0.0, stage.output_bytes_per_element);
    double in = std::max(0.0, stage.input_bytes_per_element);
    if (stage.prefetch_buffer) {
      estimate.prefetch += static_cast<double>(std::max<int64_t>(*stage.prefetch_buffer, 1)) * out;
    } else {
      estimate.queues += DefaultQueueBytes(out);
    }
    // The element being worked on and the one waiting to be handed on.
    estimate.in_flight += static_cast<double>(std::max(stage.workers, 1)) * (in + out);
    estimate.state += std::max(0.0, stage.state_bytes);
    estimate.cache += std::max(0.0, stage.memory_cache_bytes);
    estimate.disk += std::max(0.0, stage.disk_cache_bytes);
  }
  return estimate;
}

}  // namespace pipetune::models

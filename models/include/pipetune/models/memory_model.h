// The memory model: the bytes a pipeline holds in its buffers and caches for
// a given configuration, so that a plan can be checked against the memory
// budget before it is run (docs/model.md: prefetch buffers and caches count
// their bytes against the memory budget).
//
// What a stage holds, as the reference runtime (runtime/src/queue.h) keeps it:
//  - its output queue: a default queue is full at 128 elements, or once it
//    holds 4 MiB and at least one element; a prefetch queue holds `buffer`
//    elements whatever their size;
//  - in flight: each worker holds the element it works on and the one it is
//    about to hand on;
//  - state: a shuffle buffer (args.buffer input elements), a partial batch;
//  - a memory cache: every element of one epoch at the cache point.
// A disk cache holds its elements on disk, not in memory; its bytes are
// reported apart so that a plan can check the disk's free space.
//
// Every figure is an upper bound of what the structures can hold in steady
// state (peaks of allocator slack are not modelled). Pure functions.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

namespace pipetune::models {

// The runtime's default inter-stage queue limits (runtime/src/queue.h).
inline constexpr double kQueueMaxElements = 128;
inline constexpr double kQueueMaxBytes = 4.0 * 1024 * 1024;

// The most bytes a default queue of elements of `bytes_per_element` holds:
// min(128 elements, 4 MiB plus the element that crossed the limit).
double DefaultQueueBytes(double bytes_per_element);

// One stage as the memory model sees it.
struct StageMemoryInput {
  double output_bytes_per_element = 0;     // S_i
  double input_bytes_per_element = 0;      // S of the stage before (0 for a source)
  int workers = 1;                         // threads (parallelism for map / read_file)
  std::optional<int64_t> prefetch_buffer;  // set for prefetch stages: their queue holds this many
  double state_bytes = 0;                  // shuffle buffer, partial batch
  double memory_cache_bytes = 0;           // a memory cache stage: the epoch it stores
  double disk_cache_bytes = 0;             // a disk cache stage: the file it writes
};

struct MemoryEstimate {
  double queues = 0;     // default inter-stage queues
  double prefetch = 0;   // prefetch buffers (the tuner's knob)
  double in_flight = 0;  // elements workers hold
  double state = 0;      // shuffle buffers, partial batches
  double cache = 0;      // memory caches
  double disk = 0;       // disk caches (not memory; reported apart)
  // Worker processes and the consumer's own (a DataLoader's): their RSS.
  double processes = 0;

  // Bytes of memory: everything but `disk`.
  double Total() const { return queues + prefetch + in_flight + state + cache + processes; }
};

// The estimate for a whole pipeline; each stage adds its share. An empty
// pipeline holds nothing.
MemoryEstimate EstimateMemory(const std::vector<StageMemoryInput>& stages);

}  // namespace pipetune::models

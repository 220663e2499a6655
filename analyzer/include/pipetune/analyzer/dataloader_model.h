// A PyTorch DataLoader as stages of the one rate model (docs/model.md, "A
// DataLoader as stages"). There is no DataLoader model beside the engine's:
// the run's measurements (dataloader_trace.h) become a models::Profile, and
// the one diagnosis, what-if, report writers and solver serve it.
//
// The stages, per batch of B samples:
//   load, transform[k]:Name   per sample (V = B), in the worker group
//   collate                   per batch (local ratio B), in the worker group
//   transfer                  per batch, on the consumer's thread; only with workers
//   pin_memory                per batch, a thread of its own; switchable
// The worker group "workers" has num_workers workers (0: the consumer's
// thread runs the group), prefetch_factor outputs ready per worker, worker
// start-up per epoch (once when persistent) and each worker's RSS. The
// training step is the consumer's step time, and its CPU per batch the
// consumer's CPU per output.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "pipetune/analyzer/dataloader_trace.h"
#include "pipetune/analyzer/diagnosis.h"
#include "pipetune/models/profile.h"

namespace pipetune::analyzer {

// What a PyTorch DataLoader run adds to its diagnosis (dataloader.h): its
// settings as the script passed them, and what the model was told.
struct DataLoaderSection {
  DataLoaderSettings settings;  // as the script passed them (or --apply set them)
  int worker_traces = 0;
  uint64_t batches = 0;  // taken by the training loop
  uint64_t steps = 0;    // training steps that ended (the last batch's may not have)
  // An IterableDataset read by workers: how many of the worker traces'
  // streams sharded themselves by get_worker_info().
  int sharded_workers = 0;
  // Which process of a distributed job recorded it (RANK, LOCAL_RANK,
  // WORLD_SIZE as torchrun sets them) and on which host; unset outside one.
  std::optional<int> rank, local_rank, world_size;
  std::string host;
  struct Epoch {
    uint64_t batches = 0;
    int workers_started = 0;
    double startup_seconds = 0;  // iterator creation until its last worker was ready
  };
  std::vector<Epoch> epochs;
  double startup_seconds_per_epoch = 0;  // the model's, at the traced settings
  double epoch_end_seconds = 0;          // the model's fill and drain per epoch, likewise
  // The prediction is for epochs of `epoch_batches` (as the loop took them,
  // which may be fewer than len(loader)), start-up, fill and drain included;
  // epochs of `steady_from_batches` or more run within 5% of the steady
  // rate (0: no per-epoch cost to outgrow).
  double epoch_batches = 0;
  double steady_throughput = 0;
  double steady_from_batches = 0;
  double main_rss_bytes = 0;       // the consumer's process, peak
  double worker_rss_bytes = 0;     // the largest worker's peak; 0 without workers
  std::vector<std::string> notes;  // sharding of a stream, pin_memory without CUDA, skipped traces
};

// The run as the model sees it. The window is the consumer's whole loop
// (its waits and steps), so start-up is inside what was measured. Plans of
// it turn into keyword arguments in the tuner (tuner/rewrite.h).
models::Profile DataLoaderModelProfile(const DataLoaderProfile& run);

// The diagnosis of a DataLoader run: the one diagnosis over
// DataLoaderModelProfile, with the run's settings in `dataloader`.
StatusOr<Diagnosis> DiagnoseDataLoader(const DataLoaderProfile& run, const DiagnoseOptions& options = {});

}  // namespace pipetune::analyzer

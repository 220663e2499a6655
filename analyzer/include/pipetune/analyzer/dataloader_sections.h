// The sections a DataLoader run and a job of several processes add to
// their Diagnosis (diagnosis.h holds them as Extension<T>): the data that
// the diagnosis fills (dataloader_model.h, dataloader_job.h) and that the
// kinds' report sections render (src/dataloader_report.cc,
// src/dataloader_job_report.cc). Defined apart from both, so that the
// report sections include no diagnosis and the includes go one way.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "pipetune/analyzer/dataloader_trace.h"

namespace pipetune::analyzer {

// What a PyTorch DataLoader run adds to its diagnosis (dataloader_model.h): its
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
  // The whole process, start to end, as `time` counts it (DataLoaderProfile's
  // process_seconds, process_cpu_seconds); unset where the trace does not say.
  std::optional<double> process_seconds, process_cpu_seconds;
  // The GIL probe's figures (DataLoaderGilProbe): the share of its wakes in
  // the fetch windows that found the GIL held, each sample's CPU, and the
  // GIL-held seconds per sample the model took: the probe's where `used`,
  // else the CPU (too few wakes). Unset where the run has no probe figures.
  struct Gil {
    DataLoaderGilProbe probe;
    double held_share = 0;
    double cpu_seconds_per_sample = 0;
    double gil_seconds_per_sample = 0;
    bool used = false;
    // What the model prices as GIL-held a sample: the probe's figure, or all
    // of the CPU for a fetch that waits on storage (docs/model.md, "What
    // serialises a waiting fetch") or where the wakes said too little.
    double priced_seconds_per_sample = 0;
  };
  std::optional<Gil> gil;
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

// One process of a job of several (a rank of a DistributedDataParallel
// job), as the per-rank table shows it: its own diagnosis's figures.
struct RankRow {
  std::optional<int> rank, local_rank;
  std::string host;
  int pid = 0;
  std::string trace;
  uint64_t batches = 0;
  double throughput = 0;            // batches/s measured (every rank's is the job's: DDP syncs)
  double predicted_throughput = 0;  // its model at the job's step time, at most the job's (the least)
  double input_throughput = 0;      // what its input side alone delivers (no step, no start-up)
  double stall_fraction = 0;        // its loop's wait in next()
  double step_ms = 0;               // its loop's step, wall (waits at the all-reduce included)
  double step_cpu_ms = -1;          // the loop thread's CPU per step; < 0 not recorded
  std::string bound;                // its diagnosis's binding bound; empty when not diagnosed
  std::optional<std::string> bottleneck;
  int workers = 0;
  double cores_used = -1;
  uint64_t peak_rss_bytes = 0;  // the main process and its workers
  // On the job's timeline (docs/distributed.md): when its session began and
  // its last snapshot.
  double start_seconds = 0;
  double end_seconds = 0;
  // How it ended: "clean", "failed" (a nonzero exit status or an uncaught
  // exception) or "killed" (no clean end: a signal, the OOM killer, a crash).
  std::string ended = "clean";
  std::optional<int> exit_status;
  std::string exception;
  std::string error;  // why it has no diagnosis (it took no batch); empty when it has one
};

// A job of several processes, each with its own DataLoader (dataloader_job.h).
struct JobSection {
  std::vector<RankRow> ranks;  // by rank
  std::optional<int> world_size;
  int hosts = 1;
  // The rank whose input side binds the job: the least input_throughput,
  // when that is below the job's step rate; none when every rank's input
  // keeps up. The report's headline figures are its diagnosis (else the
  // diagnosis of the rank with the least input_throughput).
  std::optional<int> straggler;
  std::optional<size_t> straggler_row;  // its index in `ranks` (also when it has no rank number)
  size_t headline_row = 0;              // the rank whose diagnosis the report shows
  // The job's step: the fastest rank's, since every other rank's includes
  // its wait for the straggler at the all-reduce.
  double step_seconds = 0;
  std::string clock;  // the timeline's: "CLOCK_MONOTONIC" (one host) or "CLOCK_REALTIME"
  // Ranks below world_size that left no trace among those read (the first
  // kMostListedRanks of them); `missing`: how many. The verdicts above are
  // the recorded ranks' only.
  std::vector<int> missing_ranks;
  int missing = 0;
  std::string summary;
};

}  // namespace pipetune::analyzer

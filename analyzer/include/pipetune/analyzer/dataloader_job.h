// A job of several processes that each consumed a DataLoader: the ranks of
// a DistributedDataParallel job on one node or several (docs/distributed.md).
// Each process is read into its own DataLoaderProfile and diagnosed by the
// one DataLoader diagnosis (dataloader_model.h); the job adds only what is between
// them: one timeline, the job's step time and the straggler.
//
// DDP synchronises every step: the job runs at its slowest rank's rate, and
// every other rank's step includes its wait for that rank at the gradients'
// all-reduce. So a rank's step is not its own cost: each rank is diagnosed
// at the job's step, the fastest rank's (the straggler's own step has no
// such wait). The straggler is the rank whose input side alone (its model
// with the step taken away) delivers least, when that is less than the
// job's step allows.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "pipetune/analyzer/dataloader_sections.h"
#include "pipetune/analyzer/dataloader_trace.h"
#include "pipetune/analyzer/diagnosis.h"
#include "pipetune/base/status.h"

namespace pipetune::analyzer {

struct DataLoaderJobProcess {
  // Who it was and how it ended (DescribeDataLoaderProcess); the whole
  // profile when `error` is empty.
  DataLoaderProfile profile;
  std::string error;         // why there is no profile: it took no batch, built no DataLoader
  double start_seconds = 0;  // its session's start on the job's timeline
  double end_seconds = 0;    // its last snapshot on the job's timeline
};

struct DataLoaderJob {
  // By rank; processes without a rank after them, by trace path.
  std::vector<DataLoaderJobProcess> processes;
  // The timeline: the hosts' CLOCK_MONOTONIC when every process ran on one
  // host, else CLOCK_REALTIME (as far apart as the hosts' clocks are).
  std::string clock = "CLOCK_MONOTONIC";
  int hosts = 1;
  // The world size the records give, and the ranks below it that no trace
  // given (nor any TRACE.main.<pid> beside one) recorded: a node's traces
  // not copied, a file deleted. Listed up to kMostListedRanks; `missing`
  // counts them all.
  std::optional<int> world_size;
  std::vector<int> missing_ranks;
  int missing = 0;
};
inline constexpr int kMostListedRanks = 64;

// Reads every process of each given run: a trace and the TRACE.main.<pid>
// files beside it (JobTracePaths), the same file given twice read once.
// Traces gathered from several nodes (each ran its own `pipetune profile`)
// are one job when their ranks fit one world. Errors (kInvalidInput, naming
// the files): a trace that is not a DataLoader's main trace; two traces of
// the same rank (traces of two runs given together); different world sizes;
// no process that took a batch.
StatusOr<DataLoaderJob> ReadDataLoaderJob(const std::vector<std::string>& traces);

// The job's diagnosis: the straggler's own (or, when every rank's input
// keeps up, the slowest rank's), with `job` holding every rank's row. A job
// of one process is that process's diagnosis, with no `job`, unless its
// record names ranks that are missing: then it is a job of the ranks that
// are there, and its summary says which were recorded and which are not.
StatusOr<Diagnosis> DiagnoseDataLoaderJob(const DataLoaderJob& job, const DiagnoseOptions& options = {});

// What a plan for the whole job is made from. DDP runs every rank at the
// slowest's rate, so one plan, applied to every rank, is the plan of the
// rank whose input delivers least (the straggler when its input binds), at
// the job's step; ranks on one host share its cores and memory.
struct JobTuning {
  DataLoaderProfile run;    // that rank's profile, its step the job's
  std::optional<int> rank;  // its rank
  bool straggler = false;   // its input binds the job
  int processes = 1;        // in the job
  int ranks_per_node = 1;   // the most processes one host ran
  // The other processes on that rank's host, each at the job's step: what
  // a per-rank setting would leave the rank of the node's budget.
  std::vector<DataLoaderProfile> node_peers;
  // The rank's share of its node's cores (NodeCoreShare).
  double node_core_share = 1;
};
// Errors: DiagnoseDataLoaderJob's.
StatusOr<JobTuning> JobTuningRun(const DataLoaderJob& job);

// The share of its node's cores that `rank` holds when the node is split by
// what its ranks really use, not evenly by their count. DDP holds every rank
// to the job's rate, so at any rate each rank needs cores in proportion to
// its CPU seconds per batch: its main thread's on-CPU time (a step's wait at
// the all-reduce, or at any blocking collective, is off the CPU and holds no
// core) and its workers'. `peers`: the other ranks recorded on its node; each
// rank the node ran that is not among them (`ranks_on_node` - 1 - peers)
// counts as `rank` does. Returns a fraction in (0, 1]: 1 with no other rank;
// 1 / ranks_on_node (the even split) when some rank's CPU per batch was not
// measured (no batch, no CPU recorded).
double NodeCoreShare(const DataLoaderProfile& rank, const std::vector<DataLoaderProfile>& peers,
                     int ranks_on_node);

// The run of `trace` as one process: for a job (TRACE.main.<pid> beside it),
// JobTuningRun's rank, its step the job's; for a single process, its
// profile (ReadDataLoaderProfile). What the CI gate judges.
StatusOr<DataLoaderProfile> ReadSlowestRank(const std::string& trace);

// Whether `traces` name a job of several processes (one trace with
// TRACE.main.<pid> files beside it, or several traces).
bool IsDataLoaderJob(const std::vector<std::string>& traces);

}  // namespace pipetune::analyzer

// A PyTorch DataLoader, as the Python bootstrap records it (docs/pytorch.md):
// the traces of one run (the main process's, TRACE, and one per worker
// process, TRACE.<pid>) read into one DataLoaderProfile: what was measured,
// per stage and per process. How it is modelled is dataloader_model.h's.
//
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "pipetune/analyzer/collector.h"
#include "pipetune/base/json.h"
#include "pipetune/base/status.h"
#include "pipetune/tracer/reader.h"

namespace pipetune::analyzer {

struct DataLoaderSettings {
  int batch_size = 1;
  int num_workers = 0;
  int prefetch_factor = 2;
  int fetch_threads = 1;  // threads each fetching process reads a batch's samples with
  bool persistent_workers = false;
  bool pin_memory = false;
  std::string sampler;
  std::string start_method;  // "fork", "spawn", "forkserver"; empty at num_workers = 0
  std::string dataset;       // the dataset's class
  // An IterableDataset: its samples are a stream read with next(), not
  // indexed; with workers, each worker reads its own copy of the stream.
  bool iterable = false;
  std::optional<int64_t> dataset_length;
  std::optional<int64_t> batches_per_epoch;
  // Whether the sampler reorders the samples every epoch (RandomSampler, a
  // DistributedSampler with shuffle); unset for a sampler of the program's
  // own and in traces recorded before it.
  std::optional<bool> shuffle;
  bool drop_last = false;
  // The shards a stream is split into across the workers, each read whole
  // by one of them (a webdataset's shard list split by worker, an HF
  // IterableDataset's n_shards): a worker past this count gets no shard and
  // delivers nothing. Unset when the dataset does not say.
  std::optional<int64_t> shards;
};

// One transform a sample goes through, as recorded: its class (or a
// function's name), the class's module ("torchvision.transforms.transforms";
// "__main__" for the script's own), and its public attributes that JSON
// holds ({"size": [224, 224], "scale": [0.08, 1.0], "interpolation":
// "bilinear", ...}; always an object).
struct DataLoaderTransform {
  std::string name;
  std::string module;
  Json params = Json::object();
};

// What a DataLoader reads and how each sample is transformed, recorded at
// its construction (docs/pytorch.md, "What is recorded"): what `tune
// --engine` rebuilds the input from. Every field is optional in the trace.
struct DataLoaderDataset {
  std::string class_name;  // the dataset's class ("ImageFolder", or the program's own)
  std::string module;
  // "ImageFolder" or "DatasetFolder" when the class is, or derives from,
  // torchvision's; empty otherwise.
  std::string folder_base;
  std::string root;  // absolute, as the program's working directory made it
  // DatasetFolder's extensions (ImageFolder's are torchvision's
  // IMG_EXTENSIONS); unset when an is_valid_file function chose the files.
  std::optional<std::vector<std::string>> extensions;
  std::string loader;  // the function reading a file: "torchvision.datasets.folder.default_loader"
  std::optional<int64_t> classes;
  std::optional<int64_t> samples;
  std::string target_transform;  // its name when the labels are transformed; empty: none
  // The wrapper object holding the transforms and its attribute
  // ("ClassificationPresetTrain.transforms"); empty when `transform` is a
  // Compose or a list itself.
  std::string transform_holder;
  std::vector<DataLoaderTransform> transforms;  // in order, nested Composes flattened
};

// Which of a DataLoader's stages a recorded stage is (the start-up and the
// step are kinds the reader fills in too).
enum class DataLoaderStageKind { kLoad, kTransform, kCollate, kTransfer, kPinMemory, kStep, kStartup };

struct DataLoaderStage {
  std::string name;  // "load", "transform[0]:RandomResizedCrop", "collate", "transfer", ...
  DataLoaderStageKind kind = DataLoaderStageKind::kLoad;
  uint64_t count = 0;       // samples (load, transforms) or batches (the rest)
  double seconds_each = 0;  // wall seconds per sample or per batch
  double per_batch = 0;     // seconds per batch: seconds_each x visits_per_batch
  // Calls per batch of a sample stage: from the counts (this stage's over
  // collate's) when the run has both, since a streaming dataset's stages
  // need not run once per sample (webdataset's `batched` runs once per
  // batch, the stages after it too); 0: batch_size, once per sample.
  double visits_per_batch = 0;
  double cpu_seconds_each = -1;  // thread CPU per call, where recorded; < 0: not recorded
};

struct DataLoaderEpoch {
  uint64_t batches = 0;
  double startup_seconds = 0;  // iterator creation until every worker is ready; 0 when none started
  int workers_started = 0;
  // From the first worker's start to the last's (each is forked or spawned
  // in turn): what each further worker adds. -1 with fewer than two workers.
  double start_spread_seconds = -1;
};

// What the sample fetches held Python's GIL, from the recorder's probe
// (python/pipetune/_gilprobe.py, docs/model.md "How g is measured"),
// summed over the processes that fetched the samples: the probe's wakes due
// inside a fetch window, how many of them waited for the GIL, the windows'
// seconds, the samples fetched in them, and the probe's own CPU. The
// GIL-held seconds are gil_late / wakes x seconds. wakes == 0: not measured
// (a trace from before the probe, or no /proc/thread-self/schedstat).
struct DataLoaderGilProbe {
  uint64_t wakes = 0;
  uint64_t gil_late = 0;
  uint64_t samples = 0;
  double seconds = 0;
  double cpu_seconds = 0;
};

struct DataLoaderProfile {
  std::string trace_path;
  int worker_traces = 0;  // TRACE.<pid> files read
  std::vector<std::string> warnings;
  DataLoaderSettings settings;
  // The dataset and its transforms; unset in traces recorded before them.
  std::optional<DataLoaderDataset> dataset;
  bool cuda_available = false;
  tracer::HostFacts host;
  // False when the main process's trace has no clean end: the run was
  // killed (SIGKILL, the OOM killer) or crashed, and the profile holds what
  // it recorded up to its last snapshot.
  bool ended_cleanly = true;
  // Iterable datasets with workers: how many of the worker traces read a
  // stream whose iterator called torch.utils.data.get_worker_info() (to
  // shard itself); sharded_by_worker_info when all of them did. A stream
  // that is not sharded is read whole by every worker: each sample is
  // delivered once per worker.
  int sharded_workers = 0;
  bool sharded_by_worker_info = false;
  // Which process of a distributed job this was (RANK, LOCAL_RANK and
  // WORLD_SIZE of the environment, as torchrun sets them, or
  // torch.distributed's once initialised), and its host and pid.
  std::optional<int> rank, local_rank, world_size;
  std::string hostname;
  int pid = 0;
  // How the process ended, where it said so: sys.exit's status (nonzero
  // only) and an uncaught exception ("ValueError: ..."). A process killed
  // by a signal says nothing: its trace has no clean end (ended_cleanly).
  std::optional<int> exit_status;
  std::string exit_exception;
  // The whole process from its start to the recorder's stop, as `time`
  // counts it: wall seconds and CPU-seconds (its threads' and its reaped
  // children's, the DataLoader workers that ended). The cores used of the
  // diagnosis are the loop's window; these include the interpreter's start
  // and the imports. Unset where the trace does not say (an older recorder,
  // a process killed before its end).
  std::optional<double> process_seconds, process_cpu_seconds;
  // The session's start on the host's CLOCK_MONOTONIC and on CLOCK_REALTIME
  // (the pair the tracer takes together), and its length to the last
  // snapshot: how a job's processes are put on one timeline.
  uint64_t start_monotonic_ns = 0;
  int64_t start_unix_ns = 0;
  double duration_seconds = 0;

  std::vector<DataLoaderStage> sample_stages;  // load and transforms: per sample
  // step.cpu_seconds_each: the loop thread's CPU per training step, as the
  // recorder times it; the threads the step runs beside it are in
  // step_threads_cpu_seconds_each.
  DataLoaderStage collate, transfer, pin_memory, step;
  // The CPU per step of the main process's threads besides the loop's own
  // and the pin thread: torch's intra-op pool (a step on the CPU runs its
  // operators on every core by default), gloo's. The process's CPU over the
  // loop (its process samples) less the loop thread's and the pin thread's,
  // per step; 0 when that is under 5% of the steps' time plus two of the
  // process clock's ticks (the recorder's own sampling, rounding); -1 not
  // measured.
  double step_threads_cpu_seconds_each = -1;
  uint64_t batches = 0;     // the consumer's batches
  double wait_seconds = 0;  // the consumer's total wait in next()
  double step_seconds = 0;  // the consumer's total time between batches
  // The loop's total time in iter(loader): each epoch's iterator, which
  // starts the workers (a fork or spawn each) unless they are persistent.
  double iterator_seconds = 0;
  double batch_bytes = 0;         // a collated batch
  double main_rss_bytes = 0;      // the main process's peak
  double worker_rss_bytes = 0;    // a worker's peak (the largest); 0 when no worker ran
  double worker_cpu_seconds = 0;  // all worker processes' CPU (user + system)
  // The same from each worker's first process sample to its last: what the
  // workers spent while recording, without a spawned worker's start-up
  // (starting Python, importing torch) before its session began.
  double worker_session_cpu_seconds = 0;
  double worker_cpu_ratio = 1;  // workers' CPU over their busy wall time
  // The CPU the process loading samples got while it was loading, over that
  // time (the workers' ratio, or the main process's at num_workers=0). Well
  // under 1 for CPU-bound transforms means the host was shared: other
  // processes took the cores the budget counts on.
  double loading_cpu_share = 1;
  // The share above was under 0.75 of what the run's own processes leave
  // each other (cores / num_workers when the workers outnumber the cores)
  // while samples came from the page cache: other processes had the CPU.
  // The model then counts the workers as busy on a core for all their wall
  // time (worker_cpu_ratio = 1).
  bool shared_host = false;
  // The loading processes' time off the CPU while loading samples (their
  // wall time there less their CPU), and how much of it their main threads
  // were runnable but without a core (the run-queue delay the tracer reads
  // from /proc/self/schedstat; -1 for a trace without it). Where the delay
  // is known it decides `shared_host`; `loading_waits_off_cpu`: the share
  // was low, but the time off the CPU was spent waiting inside the work
  // (storage, the network, a lock, a sleep), not for a core.
  double loading_off_cpu_seconds = 0;
  double loading_run_delay_seconds = -1;
  bool loading_waits_off_cpu = false;
  double main_other_cpu_per_batch = 0;  // main-process CPU per batch besides loading samples
  std::vector<DataLoaderEpoch> epochs;
  DataLoaderGilProbe gil_probe;

  // The run over time, for the report's time charts: at each of the main
  // process's snapshots, the stages above in the model's order (the sample
  // stages, collate, transfer, pin_memory) with each one's counts summed
  // over the processes that ran it, the training loop's batches and waits
  // as the consumer's steps, and every process's CPU. Times are since the
  // main process's session started. Empty for a profile not read from traces.
  CollectedTrace timeline;
  // Where the training loop ran, from its first epoch's iterator to its
  // last step, and the main trace's length, on the same time. The loop's
  // span holds more than wait_seconds + step_seconds: making each epoch's
  // iterator (starting its workers) is in neither.
  double loop_begin_seconds = 0;
  double loop_end_seconds = 0;
  double trace_seconds = 0;
};

// A trace the Python bootstrap wrote (its config is the DataLoader's record).
bool IsDataLoaderTrace(const tracer::Trace& trace);
// A main process's trace (not a worker's), of any record version.
bool IsDataLoaderMainTrace(const tracer::Trace& trace);
// Reads only the header and the latest pipeline info; false on any error.
bool IsDataLoaderTraceFile(const std::string& path);

// What a trace's header says its process was: "main", "worker" (with the
// worker's id and the DataLoader it served, 0 when the record does not say),
// or "" for a trace that is not a DataLoader's or cannot be read. Reads only
// the header, as IsDataLoaderTraceFile does.
struct DataLoaderProcessRole {
  std::string role;
  int worker_id = 0;
  int loader = 0;
};
DataLoaderProcessRole ReadDataLoaderRole(const std::string& path);

// TRACE and the TRACE.<pid> files beside it, the main trace first.
std::vector<std::string> DataLoaderTracePaths(const std::string& main_trace);
// The main traces of a run of several processes (docs/distributed.md): TRACE
// (the first process that consumed a DataLoader) and the TRACE.main.<pid>
// files beside it (every other), TRACE first. Their workers' files are
// each main trace's DataLoaderTracePaths.
std::vector<std::string> JobTracePaths(const std::string& trace);

// One process's traces: its main trace and its workers' (the ones that
// could not be read are named in `skipped`). Errors: the main trace's.
struct DataLoaderTraces {
  tracer::Trace main;
  std::vector<tracer::Trace> workers;
  std::vector<std::string> skipped;
};
StatusOr<DataLoaderTraces> LoadDataLoaderTraces(const std::string& main_trace);

// Reads the run's traces into one profile. The DataLoader that delivered
// the most batches is the one profiled. A truncated trace (a killed run) is
// read up to its last whole chunk, with the reader's warning in `warnings`.
// kInvalidInput, naming the file, for a trace that is not a DataLoader's
// main trace (a worker's TRACE.<pid> names its main trace), one recorded by
// an older pipetune, a program that built no DataLoader, and one that took
// no batch.
StatusOr<DataLoaderProfile> ReadDataLoaderProfile(const std::string& main_trace);
// Who recorded a main trace and how it ended (trace_path, host, rank,
// local_rank, world_size, hostname, pid, exit_status, exit_exception,
// ended_cleanly, the clock pair, duration_seconds), whether or not it took a
// batch; nothing else of the profile is filled.
DataLoaderProfile DescribeDataLoaderProcess(const tracer::Trace& main);
// Whether the share of a core the loading processes got while loading
// samples from the page cache (DataLoaderProfile::loading_cpu_share) means
// other programs held the cores: under 0.75 of what the run's own processes
// leave each other, a whole core each, or cores / num_workers when the
// workers outnumber the cores. An unknown core count (0) counts as enough.
bool LoadingShareMeansSharedHost(double loading_cpu_share, int num_workers, double cores);
// Whether the loading's time off the CPU was contention: its run-queue delay
// (< 0: unknown, false) is half of that time or more.
bool RunDelayMeansContention(double run_delay_seconds, double off_cpu_seconds);
// How the process ended: "killed" (no clean end: a signal, the OOM killer,
// a crash), "failed" (a nonzero exit status or an uncaught exception) or
// "clean".
const char* HowItEnded(const DataLoaderProfile& p);
// The same over traces already loaded: the main process's, then the workers'.
StatusOr<DataLoaderProfile> MakeDataLoaderProfile(const tracer::Trace& main,
                                                  const std::vector<tracer::Trace>& workers);

}  // namespace pipetune::analyzer

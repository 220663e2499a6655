// A DataLoader run as stages of the one rate model (pipetune/analyzer/dataloader_model.h).
#include "pipetune/analyzer/dataloader_model.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>

#include "dataloader_report.h"
#include "gpu_diagnosis.h"
#include "pipetune/base/numbers.h"
#include "recording.h"
#include "timeline.h"

namespace pipetune::analyzer {
namespace {

// Costs of stages the traced run did not have, so that what-ifs and plans
// can price them. Unpickling a batch from a worker: a fixed cost and
// shared-memory rebuilding per byte; pinning copies every byte once.
constexpr double kTransferFixedSeconds = 2e-4;
constexpr double kTransferBytesPerSecond = 20e9;
constexpr double kPinBytesPerSecond = 5e9;
// Start-up of one worker where no worker started in the trace: fork copies a
// page table, spawn and forkserver start Python and import torch.
constexpr double kForkStartupSeconds = 0.02;
constexpr double kSpawnStartupSeconds = 0.5;
// A worker's own CPU per batch where the run had no workers to measure it
// (MeasureWorkerOverhead): its fetch loop and putting the batch on the
// result queue, a fixed cost, and moving the batch's tensors into shared
// memory, a copy of every byte. Measured with workers on the 2-core
// development machine: 1.0-1.8 ms per batch of 24 KiB
// (bench/pytorch/model_accuracy.py, docs/benchmarks-pytorch.md).
constexpr double kWorkerOverheadFixedSeconds = 1e-3;
constexpr double kWorkerOverheadBytesPerSecond = 4e9;
// A fetch thread's own memory besides the sample it holds: the pages of its
// stack and interpreter state it touches (a few hundred KiB of the 8 MiB it
// reserves).
constexpr double kFetchThreadBytes = 256 * 1024;

// Whether the probe's wakes say enough: the share of late wakes within 10
// points of the truth, two standard errors of a share (with one late and one
// on-time wake added, so that 20 of 20 late is not taken as certain): 100
// wakes at a share of a half, 20 where nearly all or none were late. A
// fetch that holds the GIL and lets go of it briefly and often (a tensor
// made per sample: CPython then takes it back before a waiter wakes) starves
// the probe to 20-30 wakes a second, every one late: enough to say "all of
// it", not enough for a half.
constexpr uint64_t kMinGilProbeWakes = 20;
bool EnoughWakes(const DataLoaderGilProbe& probe) {
  if (probe.wakes < kMinGilProbeWakes) return false;
  const double n = static_cast<double>(probe.wakes), p = (static_cast<double>(probe.gil_late) + 1) / (n + 2);
  return 2 * std::sqrt(p * (1 - p) / n) <= 0.1;
}

// How much of each sample's CPU holds the GIL: measured by the recorder's
// probe (DataLoaderGilProbe) where it woke often enough in the fetch
// windows, else assumed to be all of it (a trace from before the probe).
// The probe's GIL-held seconds are its late wakes' share of the windows'
// seconds; its windows hold only the samples' stages (collate runs outside
// them), so nothing the model counts elsewhere is in them. At most the CPU:
// a hold beyond it is another thread's (see docs/model.md for the limits).
struct FetchGil {
  double seconds_per_sample = 0;
  bool measured = false;
};
FetchGil FetchGilPerSample(const DataLoaderGilProbe& probe, double cpu_per_sample) {
  if (!EnoughWakes(probe) || probe.samples == 0 || probe.seconds <= 0) return {cpu_per_sample, false};
  const double held = static_cast<double>(probe.gil_late) / static_cast<double>(probe.wakes) * probe.seconds /
                      static_cast<double>(probe.samples);
  return {std::clamp(held, 0.0, cpu_per_sample), true};
}

// Fetch threads (WorkerGroup::fetch_threads) for a map-style dataset: the
// samples' stages run on them, collate after. The part of a fetch's CPU
// that holds the GIL (FetchGilPerSample: measured by the probe, else all of
// it) is what the threads cannot overlap; a read that waits on storage
// releases the GIL. In the model a round of k reads that start together
// lasts one latency plus the other k - 1 samples' GIL time
// (models/src/rate_model.cc, GroupSecondsPerOutput).
//
// A run traced with K > 1 threads reading in such rounds (no workers, or
// prefetch 1) measured each sample's wall with its wait for the GIL behind
// the round's other samples in it: the round's last read waits for all
// K - 1 others, the mean one for half of them, (K - 1) x g / 2. That is no
// wait on storage: it is taken out of the stage that waits most, as the
// run-queue wait is, so that the model sees the storage's latency and adds
// the queue for the K it prices. Measured at K = 32 on a store 25 ms away:
// a 42.3 ms mean read less 31 x 0.79 / 2 is 30.1 ms, and the traced
// setting is then predicted at 1.03 of what it ran (taking all of
// (K - 1) x g left 18 ms and predicted 1.34).
void SetFetchThreads(const DataLoaderProfile& run, models::Profile& profile, size_t group_last,
                     models::WorkerGroup& group, std::vector<std::string>& assumptions) {
  const DataLoaderSettings& s = run.settings;
  group.fetch_threads = std::max(1, s.fetch_threads);
  group.fetch_samples = std::max(1, s.batch_size);
  group.fetch_last_stage = group_last > 0 ? group_last - 1 : 0;
  if (s.iterable || group_last == 0) return;  // a stream is read in order by one thread
  group.fetch_threads_knob = kFetchThreadsKnob;
  const double samples = group.fetch_samples;
  auto fetch = [&] {
    double cpu = 0, wall = 0;
    for (size_t i = 0; i < group_last; ++i) {
      cpu += profile.stages[i].cpu_seconds_per_output;
      wall += profile.stages[i].visit_ratio * profile.stages[i].latency_seconds;
    }
    return std::pair{cpu / samples, wall / samples};
  };
  const auto [cpu, traced_wall] = fetch();
  const FetchGil probed = FetchGilPerSample(run.gil_probe, cpu);
  // A fetch that waits on storage (its wall over twice its CPU) is priced
  // with all of its CPU: with many threads waiting, each of its calls that
  // lets the GIL go is a handoff to a sleeping thread, and the rounds
  // measured that, not the probe's holds (docs/model.md, "What serialises a
  // waiting fetch"). A fetch that is mostly CPU (a decoder, a hash) is
  // priced with what the probe measured.
  const bool waits = traced_wall > 2 * cpu && cpu > 0;
  const double g = waits ? cpu : probed.seconds_per_sample;
  const double queued = models::FetchReadsInRounds(group.workers, group.buffer_per_worker)
                            ? (std::min(group.fetch_threads, group.fetch_samples) - 1) * g / 2
                            : 0;
  if (queued > 0) {
    size_t waits_most = 0;
    double most = -1;
    for (size_t i = 0; i < group_last; ++i) {
      const models::StageProfile& stage = profile.stages[i];
      const double off_cpu = stage.visit_ratio * (stage.latency_seconds - stage.cpu_seconds_per_element);
      if (off_cpu > most) most = off_cpu, waits_most = i;
    }
    models::StageProfile& stage = profile.stages[waits_most];
    const double take = std::min(queued * samples, std::max(0.0, most)) / std::max(stage.visit_ratio, 1e-12);
    stage.latency_seconds -= take;
    stage.latency_bound = stage.latency_seconds > 2 * stage.cpu_seconds_per_element;
    assumptions.push_back(
        fmt::format("the run read with {} fetch threads in rounds: {:.1f} ms of each sample's {:.1f} ms read "
                    "was its wait for the GIL behind half of the round's other samples (half of {} x {:.2f} "
                    "ms), not storage, and is taken out of stage \"{}\"",
                    group.fetch_threads, take * stage.visit_ratio / samples * 1e3, traced_wall * 1e3,
                    std::min(group.fetch_threads, group.fetch_samples) - 1, g * 1e3, stage.name));
  }
  const double wall = fetch().second;
  group.fetch_cpu_seconds_per_sample = cpu;
  group.fetch_gil_seconds_per_sample = g;
  group.fetch_wait_seconds_per_sample = std::max(0.0, wall - cpu);
  group.memory_bytes_per_fetch_thread = kFetchThreadBytes + run.batch_bytes / samples;
  if (waits) {
    const std::string probe =
        probed.measured ? fmt::format(
                              "the probe measured {:.2f} ms of it holding the GIL ({} wakes), but with many "
                              "threads waiting every call that lets the GIL go hands it to a sleeping "
                              "thread, and a round of reads queues for about all of it",
                              probed.seconds_per_sample * 1e3, run.gil_probe.wakes)
                        : std::string("no usable probe figure");
    assumptions.push_back(fmt::format(
        "each sample's read waits {:.1f} ms off the CPU and uses {:.2f} ms of CPU: fetch threads overlap the "
        "waits; its CPU is priced as holding Python's GIL, which threads of one process cannot overlap ({})",
        (wall - cpu) * 1e3, cpu * 1e3, probe));
  }
}

// The workers' start-up as fixed + w * per_worker. Workers start one after
// another, each ready some time after its start: from epochs that started
// two or more, per_worker is the spacing of their starts and fixed the rest
// (making the iterator, the last worker's way to ready). Taken as all per
// worker, a 2-worker trace's 31 ms each predicted 0.78 s for 25 workers that
// started in 0.27-0.30 s (bench/pytorch/short_run.py); from its starts' 14 ms
// spacing, 0.38 s. With one worker per epoch there is no spacing to see:
// all of it is per worker.
struct Startup {
  double fixed = 0;
  double per_worker = 0;
};
Startup WorkerStartup(const DataLoaderProfile& p) {
  double total = 0, spread = 0;
  int workers = 0, spaced = 0, spread_epochs = 0;
  for (const DataLoaderEpoch& e : p.epochs) {
    if (e.workers_started == 0 || e.startup_seconds <= 0) continue;
    total += e.startup_seconds;
    workers += e.workers_started;
    if (e.start_spread_seconds >= 0 && e.start_spread_seconds <= e.startup_seconds) {
      spread += e.start_spread_seconds;
      spaced += e.workers_started - 1;
      ++spread_epochs;
    }
  }
  if (workers == 0) {
    bool spawned = p.settings.start_method == "spawn" || p.settings.start_method == "forkserver";
    return {0, spawned ? kSpawnStartupSeconds : kForkStartupSeconds};
  }
  if (spread_epochs == 0 || spaced == 0) return {0, total / workers};
  Startup s;
  s.per_worker = spread / spaced;
  double fixed = 0;
  int epochs = 0;
  for (const DataLoaderEpoch& e : p.epochs) {
    if (e.workers_started == 0 || e.startup_seconds <= 0) continue;
    fixed += std::max(0.0, e.startup_seconds - e.workers_started * s.per_worker);
    ++epochs;
  }
  s.fixed = fixed / epochs;
  return s;
}

// CPU seconds per call: recorded per call where the recorder measured it,
// else the wall time scaled by the loading processes' CPU over their busy time.
double CpuEach(const DataLoaderStage& stage, double cpu_ratio) {
  if (stage.cpu_seconds_each >= 0) return stage.cpu_seconds_each;
  return stage.seconds_each * cpu_ratio;
}

struct StageInput {
  const DataLoaderStage* measured = nullptr;
  std::string op_name;
  models::Op op = models::Op::kMap;
  double local_ratio = 1;
  double visit_ratio = 1;
  double estimate_seconds = 0;  // used when the run did not have the stage
};

models::StageProfile MakeStage(const StageInput& in, double window_seconds, double contention,
                               double cpu_ratio) {
  models::StageProfile stage;
  const DataLoaderStage& m = *in.measured;
  stage.name = m.name;
  stage.op = in.op;
  stage.op_name = in.op_name;
  stage.parallel = false;
  stage.local_ratio = in.local_ratio;
  stage.local_ratio_measured = false;
  stage.visit_ratio = in.visit_ratio;
  stage.elements = static_cast<double>(m.count);
  stage.consumed = stage.elements * in.local_ratio;
  double cpu = m.count > 0 ? CpuEach(m, cpu_ratio) : in.estimate_seconds;
  double wall = m.count > 0 ? m.seconds_each : in.estimate_seconds;
  stage.estimated = m.count == 0;
  stage.cpu_seconds_per_element = std::min(cpu, std::max(wall, cpu));
  stage.measured_latency_seconds = wall;
  models::SetStageLatency(stage, stage.cpu_seconds_per_element, wall, contention);
  stage.cpu_seconds = stage.cpu_seconds_per_element * stage.elements;
  stage.work_seconds = wall * stage.elements;
  stage.cpu_seconds_per_output = stage.cpu_seconds_per_element * in.visit_ratio;
  stage.busy_fraction = std::min(1.0, SafeDiv(stage.work_seconds, window_seconds));
  stage.scaling.kind = models::ScalingKind::kLinear;
  return stage;
}

// The training step's CPU: the loop thread's and the threads it runs beside
// it (torch's intra-op pool), which hold cores while the step runs as the
// loop's thread does; the main process's CPU besides loading where the
// steps' CPU was not recorded.
double StepCpuSeconds(const DataLoaderProfile& p) {
  if (p.step.cpu_seconds_each < 0) return p.main_other_cpu_per_batch;
  return p.step.cpu_seconds_each + std::max(0.0, p.step_threads_cpu_seconds_each);
}

// How much longer than its CPU the loading took because the cores were all
// busy (1: they were not). The loading processes used nearly every core:
// their off-CPU time was spent waiting for one.
double Contention(const DataLoaderProfile& p, double window_seconds, double cores) {
  double loading_cpu = p.settings.num_workers > 0 ? p.worker_cpu_seconds : 0.0;
  for (const DataLoaderStage& s : p.sample_stages) {
    if (p.settings.num_workers == 0 && s.cpu_seconds_each >= 0) loading_cpu += s.cpu_seconds_each * s.count;
  }
  double consumer_cpu = p.step.cpu_seconds_each >= 0 ? StepCpuSeconds(p) * p.step.count : 0.0;
  // The loading processes' off-CPU time is waiting for a core rather than
  // for I/O when they (and the consumer) used nearly every core.
  bool saturated = models::CpuSaturated((loading_cpu + consumer_cpu) / window_seconds, cores);
  if (!saturated || p.loading_cpu_share <= 0) return 1.0;
  return std::max(1.0, 1.0 / p.loading_cpu_share);
}

// A worker's CPU outside every recorded stage (the fetch loop, pickling each
// batch onto the result queue) is per batch, and the group's own: it is paid
// only while there are workers, and as CPU only (the sampler thread is part
// of it and runs beside the work, so it is not time the worker is busy). It
// stays out of the stages, so that each stage's cost is its code's (the CI
// gate judges them). Only with per-call CPU recorded (the stages' CPU is
// their own then) and workers that recorded their process CPU over their
// sessions.
//
// The GIL probe's own CPU is left out: it runs only while a run is traced,
// waking every few milliseconds of a fetch window, so a fetch that waits
// long gives it many wakes. Measured on a store 25 ms away at 2 workers x 1
// thread: 0.20 s of the workers' 0.37 s outside the stages over 20 batches
// (9.9 of 8.5-11.8 ms a batch), which the model had priced as the job's
// own, and the plans it made were then CPU-bound at a rate the job beat.
void MeasureWorkerOverhead(const DataLoaderProfile& run, const models::Profile& profile, size_t group_last,
                           models::WorkerGroup& group, std::vector<std::string>& assumptions) {
  const models::StageProfile& collate = profile.stages[group_last];
  if (run.settings.num_workers == 0) {
    // Nothing to measure; what-ifs and plans with workers pay an estimate.
    double per_batch = kWorkerOverheadFixedSeconds + run.batch_bytes / kWorkerOverheadBytesPerSecond;
    group.overhead_cpu_seconds_per_output = per_batch * collate.visit_ratio;
    assumptions.push_back(fmt::format(
        "with workers, each would spend about {:.2f} ms of CPU per batch outside the stages (its fetch loop, "
        "moving the batch into shared memory): estimated, since this run had none to measure",
        per_batch * 1e3));
    return;
  }
  if (run.worker_session_cpu_seconds <= 0 || collate.elements <= 0) return;
  double stage_cpu = 0;
  for (size_t i = 0; i <= group_last; ++i) {
    const DataLoaderStage* measured = i < run.sample_stages.size() ? &run.sample_stages[i] : &run.collate;
    if (measured->cpu_seconds_each < 0) return;
    stage_cpu += profile.stages[i].cpu_seconds;
  }
  // Only the workers' probes are summed where there are workers.
  const double probe = run.gil_probe.cpu_seconds;
  double per_batch = std::max(0.0, run.worker_session_cpu_seconds - stage_cpu - probe) / collate.elements;
  if (per_batch <= 0) return;
  group.overhead_cpu_seconds_per_output = per_batch * collate.visit_ratio;
  assumptions.push_back(fmt::format(
      "the workers spent {:.3f} ms of CPU per batch outside every recorded stage (their fetch loop, "
      "pickling the batch for the main process): counted as the workers' own CPU while there are workers{}",
      per_batch * 1e3,
      probe > 0 ? fmt::format(" (the GIL probe's {:.3f} ms a batch left out: it runs only while traced)",
                              probe / collate.elements * 1e3)
                : std::string()));
}

void NoteAssumptions(const DataLoaderProfile& run, models::Profile& profile) {
  profile.assumptions.push_back(
      "workers are taken to scale linearly: each worker process runs the group's stages one after another");
  if (run.shared_host && run.loading_run_delay_seconds >= 0) {
    profile.assumptions.push_back(fmt::format(
        "the loading processes got {:.0f}% of a core while loading samples and spent {:.0f}% of their time "
        "off "
        "the CPU runnable, waiting for a core (run-queue delay): other programs held the cores; set --cores "
        "to "
        "the free share",
        100 * run.loading_cpu_share,
        100 * std::min(1.0, run.loading_run_delay_seconds / std::max(run.loading_off_cpu_seconds, 1e-12))));
  } else if (run.shared_host) {
    profile.assumptions.push_back(fmt::format(
        "the loading processes got {:.0f}% of a core while loading samples from the page cache: taken as "
        "other "
        "programs holding the cores (this trace has no run-queue delay to tell that from waiting inside "
        "load); set --cores to the free share",
        100 * run.loading_cpu_share));
  } else if (run.loading_waits_off_cpu) {
    profile.assumptions.push_back(fmt::format(
        "the loading processes got {:.0f}% of a core while loading samples, but waited for a core only "
        "{:.0f}% "
        "of their time off the CPU (run-queue delay): the rest is waiting inside the stages (storage, the "
        "network, a lock, a sleep), not other programs holding the cores; it is latency, which more workers "
        "hide",
        100 * run.loading_cpu_share,
        run.loading_off_cpu_seconds > 0 ? 100 * run.loading_run_delay_seconds / run.loading_off_cpu_seconds
                                        : 0.0));
  }
  for (const models::StageProfile& stage : profile.stages) {
    if (stage.estimated && stage.name == "transfer") {
      profile.assumptions.push_back(
          "the run had no workers: unpickling a worker's batch is estimated from the batch's bytes");
    } else if (stage.estimated && stage.name == "pin_memory") {
      profile.assumptions.push_back(
          "the run did not pin memory: pinning is estimated from the batch's bytes");
    }
  }
}

// The GPU's wait for the DataLoader, when the run's process recorded GPU
// activity (CUDA's injection, MAIN.gpu.<pid>, read by DataLoaderGpu): how
// much of the loop it spent waiting, and for which stage. Empty when it
// never waited.
std::string GpuWaitSentence(const DataLoaderProfile& run, const Diagnosis& d) {
  if (!d.gpu) return "";
  const GpuAnalysis& a = d.gpu->analysis;
  double loop = run.loop_end_seconds - run.loop_begin_seconds;
  if (a.input_stall_seconds <= 0 || loop <= 0 || a.devices.empty()) return "";
  double share = a.input_stall_seconds / (loop * static_cast<double>(a.devices.size()));
  return fmt::format(" The GPU waited for the DataLoader {:.0f}% of the loop{}{}.", 100 * share,
                     a.inferred ? " (inferred from its own timeline)" : "",
                     d.bottleneck ? fmt::format(", for {} most of all", *d.bottleneck) : "");
}

}  // namespace

models::Profile DataLoaderModelProfile(const DataLoaderProfile& run) {
  const DataLoaderSettings& s = run.settings;
  const double batch = std::max(1, s.batch_size);
  models::Profile profile;
  profile.pipeline_name = s.dataset.empty() ? "DataLoader" : "DataLoader(" + s.dataset + ")";
  // The DataLoader's own time in the loop: its iterators (starting the
  // workers) and the waits for batches; and the steps. Not the loop's other
  // code between epochs (an evaluation, a checkpoint).
  profile.window_seconds = std::max(run.iterator_seconds + run.wait_seconds + run.step_seconds, 1e-9);
  profile.window_begin_seconds = run.loop_begin_seconds;
  profile.window_end_seconds =
      std::max(run.loop_end_seconds, run.loop_begin_seconds + profile.window_seconds);
  profile.window_reason =
      "the training loop, from its first epoch's iterator to its last step (throughput over its iterators' "
      "start, its waits for batches and its steps)";
  profile.outputs = static_cast<double>(run.batches);
  profile.measured_throughput = profile.outputs / profile.window_seconds;
  profile.consumer_stall_fraction = std::min(1.0, run.wait_seconds / profile.window_seconds);
  profile.cores = run.host.UsableCores() > 0 ? run.host.UsableCores() : 1.0;
  if (run.host.UsableCores() <= 0)
    profile.assumptions.push_back("the host's core count is unknown; 1 core assumed");
  profile.cpu_contention = Contention(run, profile.window_seconds, profile.cores);

  const double worker_ratio = run.settings.num_workers > 0 ? run.worker_cpu_ratio : 1.0;
  std::vector<StageInput> inputs;
  for (const DataLoaderStage& stage : run.sample_stages) {
    bool load = stage.kind == DataLoaderStageKind::kLoad;
    inputs.push_back({&stage, load ? "dataset" : "transform", load ? models::Op::kReadFile : models::Op::kMap,
                      1, stage.visits_per_batch > 0 ? stage.visits_per_batch : batch, 0});
  }
  inputs.push_back({&run.collate, "collate", models::Op::kBatch, batch, 1, 0});
  const size_t group_last = inputs.size() - 1;
  inputs.push_back({&run.transfer, "transfer", models::Op::kMap, 1, 1,
                    kTransferFixedSeconds + run.batch_bytes / kTransferBytesPerSecond});
  inputs.push_back(
      {&run.pin_memory, "pin_memory", models::Op::kMap, 1, 1, run.batch_bytes / kPinBytesPerSecond});
  for (size_t i = 0; i < inputs.size(); ++i) {
    double ratio = i <= group_last ? worker_ratio : 1.0;
    models::StageProfile stage = MakeStage(inputs[i], profile.window_seconds, profile.cpu_contention, ratio);
    if (i <= group_last) {
      stage.group = 0;
      // Busy is a share of the time of the workers that run it, as a config's stage's.
      stage.busy_fraction =
          std::min(1.0, SafeDiv(stage.work_seconds, profile.window_seconds * std::max(1, s.num_workers)));
    }
    profile.stages.push_back(std::move(stage));
  }
  models::StageProfile& collate = profile.stages[group_last];
  collate.bytes_per_element = run.batch_bytes;
  collate.bytes = run.batch_bytes * collate.elements;
  models::StageProfile& transfer = profile.stages[group_last + 1];
  transfer.on_consumer_thread = true;
  transfer.needs_workers_of = 0;
  models::StageProfile& pin = profile.stages[group_last + 2];
  pin.switchable = true;
  pin.enabled = s.pin_memory;
  pin.switch_knob = kPinMemoryKnob;
  // With a GPU, pinned memory speeds the copy to it, which the model does
  // not see; without one pinning only costs time.
  pin.may_switch_off = !run.cuda_available;

  models::WorkerGroup group;
  group.name = "workers";
  group.first_stage = 0;
  group.last_stage = group_last;
  group.workers = s.num_workers;
  group.may_run_on_consumer = true;
  group.buffer_per_worker = s.num_workers > 0 ? std::max(1, s.prefetch_factor) : 2;
  group.persistent = s.persistent_workers;
  const Startup startup = WorkerStartup(run);
  group.startup_seconds_fixed = startup.fixed;
  group.startup_seconds_per_worker = startup.per_worker;
  group.memory_bytes_per_worker = run.worker_rss_bytes > 0 ? run.worker_rss_bytes : run.main_rss_bytes;
  if (s.iterable && s.shards) {
    group.max_workers = static_cast<int>(std::min<int64_t>(*s.shards, std::numeric_limits<int>::max()));
    group.max_workers_reason = fmt::format(
        "the stream has {} shard{}, each read whole by one worker: a worker beyond {} gets none and delivers "
        "nothing",
        *s.shards, *s.shards == 1 ? "" : "s", *s.shards);
  }
  group.workers_knob = kNumWorkersKnob;
  group.buffer_knob = kPrefetchFactorKnob;
  group.persistent_knob = kPersistentWorkersKnob;
  MeasureWorkerOverhead(run, profile, group_last, group, profile.assumptions);
  SetFetchThreads(run, profile, group_last, group, profile.assumptions);
  profile.groups.push_back(std::move(group));

  if (run.step.count > 0) profile.step_time_seconds = run.step.seconds_each;
  profile.consumer_cpu_seconds_per_output = StepCpuSeconds(run);
  if (run.step.count > 0 && run.step.seconds_each > 0)
    profile.consumer_step_cores = profile.consumer_cpu_seconds_per_output / run.step.seconds_each;
  double epochs = std::max<double>(1, static_cast<double>(run.epochs.size()));
  profile.epochs = epochs;
  // The epoch as the loop took it, not len(loader): a run that stops after
  // 60 of an epoch's 10000 batches pays its workers' start-up over 60
  // batches, and what it measures, and what `tune --verify` runs again, is
  // that run. (Spread over len(loader), 25 workers' start-up vanished from
  // the prediction, which a 60-batch run then missed by 0.71.) The report and
  // the plan say from what epoch length the steady rate holds.
  if (run.batches > 0) {
    profile.outputs_per_epoch = static_cast<double>(run.batches) / epochs;
  } else if (s.batches_per_epoch && *s.batches_per_epoch > 0) {
    profile.outputs_per_epoch = static_cast<double>(*s.batches_per_epoch);
  }
  profile.base_memory_bytes = run.main_rss_bytes;
  double process_cpu = run.worker_cpu_seconds + profile.consumer_cpu_seconds_per_output * profile.outputs;
  for (const models::StageProfile& stage : profile.stages) {
    if (!stage.group || s.num_workers == 0) process_cpu += stage.cpu_seconds;
  }
  profile.process_cpu_cores = process_cpu / profile.window_seconds;
  NoteAssumptions(run, profile);
  return profile;
}

StatusOr<Diagnosis> DiagnoseDataLoader(const DataLoaderProfile& run, const DiagnoseOptions& options) {
  models::Profile profile = DataLoaderModelProfile(run);
  internal::Recording recording;
  // The same time charts as a config's, from the run's processes merged.
  recording.timeline = internal::Timeline(run.timeline);
  recording.trace_seconds = run.trace_seconds > 0 ? run.trace_seconds : profile.window_end_seconds;
  // Saturated: a damaged trace's RSS samples can sum past 2^64 bytes, and
  // converting that is undefined (fuzz/trace_analysis_fuzz.cc).
  recording.peak_rss_bytes = static_cast<uint64_t>(
      std::clamp(run.main_rss_bytes + run.worker_rss_bytes * run.settings.num_workers, 0.0, 1.8e19));
  recording.ended_cleanly = run.ended_cleanly;
  for (const std::string& warning : run.warnings) {
    if (warning.find("byte") != std::string::npos && recording.truncation_warning.empty())
      recording.truncation_warning = warning;
  }
  std::string gpu_warning;
  recording.gpu = internal::DataLoaderGpu(run.trace_path, run.pid, run.loop_begin_seconds,
                                          run.loop_end_seconds, gpu_warning);
  PIPETUNE_ASSIGN_OR_RETURN(Diagnosis d, internal::DiagnoseRecording(std::move(profile), run.trace_path,
                                                                     options, std::move(recording)));
  DataLoaderSection section;
  section.settings = run.settings;
  section.worker_traces = run.worker_traces;
  section.batches = run.batches;
  section.steps = run.step.count;
  section.sharded_workers = run.sharded_workers;
  section.rank = run.rank;
  section.local_rank = run.local_rank;
  section.world_size = run.world_size;
  section.host = run.hostname;
  section.process_seconds = run.process_seconds;
  section.process_cpu_seconds = run.process_cpu_seconds;
  if (run.gil_probe.wakes > 0 && !d.profile.groups.empty()) {
    const models::WorkerGroup& group = d.profile.groups[0];
    const FetchGil gil = FetchGilPerSample(run.gil_probe, group.fetch_cpu_seconds_per_sample);
    section.gil = DataLoaderSection::Gil{run.gil_probe,
                                         static_cast<double>(run.gil_probe.gil_late) / run.gil_probe.wakes,
                                         group.fetch_cpu_seconds_per_sample,
                                         gil.seconds_per_sample,
                                         gil.measured,
                                         group.fetch_gil_seconds_per_sample};
  }
  for (const DataLoaderEpoch& e : run.epochs)
    section.epochs.push_back({e.batches, e.workers_started, e.startup_seconds});
  section.main_rss_bytes = run.main_rss_bytes;
  section.worker_rss_bytes = run.worker_rss_bytes;
  section.startup_seconds_per_epoch = d.prediction.startup_seconds_per_epoch;
  section.epoch_end_seconds = d.prediction.epoch_end_seconds;
  section.epoch_batches = d.profile.outputs_per_epoch.value_or(0);
  section.steady_throughput = d.prediction.steady_throughput;
  section.steady_from_batches = models::EpochOutputsForSteadyRate(d.prediction);
  section.notes = run.warnings;
  if (run.settings.iterable && run.settings.num_workers > 0 && !run.sharded_by_worker_info) {
    section.notes.push_back(fmt::format(
        "the IterableDataset's stream is not sharded: {} of {} workers called get_worker_info(), so each "
        "unsharded worker delivers the whole stream again (duplicate samples)",
        run.sharded_workers, run.worker_traces));
  }
  if (run.settings.iterable && run.settings.shards && run.settings.num_workers > *run.settings.shards) {
    section.notes.push_back(fmt::format(
        "the stream has {} shard{} for {} workers: {} of them got no shard and sat idle (each shard is read "
        "whole by one worker)",
        *run.settings.shards, *run.settings.shards == 1 ? "" : "s", run.settings.num_workers,
        run.settings.num_workers - *run.settings.shards));
  }
  if (run.settings.pin_memory && !run.cuda_available) {
    section.notes.push_back("pin_memory=True but no CUDA device: pinning only costs time");
  }
  if (!gpu_warning.empty()) section.notes.push_back(gpu_warning);
  d.summary += GpuWaitSentence(run, d);
  d.kind_report = internal::DataLoaderKindReport(section);
  d.dataloader = std::move(section);
  return d;
}

}  // namespace pipetune::analyzer

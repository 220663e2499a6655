// The DataLoader's rate model and its diagnosis (pipetune/analyzer/dataloader.h).
#include <fmt/format.h>

#include <algorithm>
#include <limits>

#include "pipetune/analyzer/dataloader.h"

namespace pipetune::analyzer {

const char* DataLoaderBoundName(DataLoaderBound bound) {
  switch (bound) {
    case DataLoaderBound::kSerial:
      return "main process (num_workers=0: everything serial)";
    case DataLoaderBound::kWorkers:
      return "workers";
    case DataLoaderBound::kCores:
      return "cores";
    case DataLoaderBound::kMainProcess:
      return "main process";
    case DataLoaderBound::kPinMemory:
      return "pin_memory thread";
  }
  return "?";
}

DataLoaderKnobs CurrentKnobs(const DataLoaderSettings& s) {
  return {s.num_workers, s.num_workers > 0 ? s.prefetch_factor : 2, s.persistent_workers, s.pin_memory};
}

namespace {

// Seconds to start one worker: measured where workers started, else a
// default by start method (fork copies a page table; spawn starts Python and
// imports torch).
double StartupPerWorker(const DataLoaderProfile& p) {
  double total = 0;
  int workers = 0;
  for (const DataLoaderEpoch& e : p.epochs) {
    if (e.workers_started == 0 || e.startup_seconds <= 0) continue;
    total += e.startup_seconds;
    workers += e.workers_started;
  }
  if (workers > 0) return total / workers;
  return p.settings.start_method == "spawn" || p.settings.start_method == "forkserver" ? 0.5 : 0.02;
}

// Transfer (unpickling) per batch: measured, else estimated from the batch's
// bytes (shared-memory tensors: a fixed cost and a small per-byte one).
double TransferSeconds(const DataLoaderProfile& p) {
  if (p.transfer.count > 0) return p.transfer.seconds_each;
  return 2e-4 + p.batch_bytes / 20e9;
}

double PinSeconds(const DataLoaderProfile& p) {
  if (p.pin_memory.count > 0) return p.pin_memory.seconds_each;
  return p.batch_bytes / 5e9;
}

const DataLoaderStage* LargestWorkerStage(const DataLoaderProfile& p) {
  const DataLoaderStage* best = &p.collate;
  for (const DataLoaderStage& s : p.sample_stages) {
    if (s.per_batch > best->per_batch) best = &s;
  }
  return best;
}

}  // namespace

DataLoaderPrediction PredictDataLoader(const DataLoaderProfile& p, const DataLoaderKnobs& k, double cores) {
  DataLoaderPrediction out;
  const double w = p.WorkerSecondsPerBatch();
  const double step = p.step.seconds_each;
  const double pin = k.pin_memory ? PinSeconds(p) : 0.0;
  const double measured_workers = p.settings.num_workers;
  const double epochs = std::max<size_t>(1, p.epochs.size());
  double batches_per_epoch = p.settings.batches_per_epoch ? static_cast<double>(*p.settings.batches_per_epoch)
                                                          : static_cast<double>(p.batches) / epochs;
  batches_per_epoch = std::max(1.0, batches_per_epoch);
  const DataLoaderStage* data = LargestWorkerStage(p);
  auto name_data = [&] {
    out.limiting_stage = data->name;
    out.limiting_kind = data->kind;
  };
  double worker_rss = p.worker_rss_bytes > 0 ? p.worker_rss_bytes : p.main_rss_bytes;
  if (k.num_workers == 0) {
    double t = w + step + pin;
    out.steady_batches_per_second = t > 0 ? 1.0 / t : 0.0;
    out.bound = DataLoaderBound::kSerial;
    if (step >= data->per_batch && step >= pin) {
      out.limiting_stage = p.step.name;
      out.limiting_kind = DataLoaderStageKind::kStep;
    } else if (pin > data->per_batch) {
      out.limiting_stage = p.pin_memory.name;
      out.limiting_kind = DataLoaderStageKind::kPinMemory;
    } else {
      name_data();
    }
    out.cores_used = t > 0 ? (w * p.worker_cpu_ratio + p.main_other_cpu_per_batch) / t : 0.0;
    out.memory_bytes = p.main_rss_bytes + 2 * p.batch_bytes;
    out.batches_per_second = out.steady_batches_per_second;
    return out;
  }
  const double n = k.num_workers;
  const double inf = std::numeric_limits<double>::infinity();
  double x_workers = w > 0 ? n / w : inf;
  // The main process's serial work: the step and, when it had workers, the
  // measured transfer; with num_workers=0 measured, a transfer estimate.
  double main_other = p.main_other_cpu_per_batch;
  double transfer = TransferSeconds(p);
  double x_main = step + transfer > 0 ? 1.0 / (step + transfer) : inf;
  double x_pin = pin > 0 ? 1.0 / pin : inf;
  double cpu_per_batch = w * p.worker_cpu_ratio + main_other + (measured_workers == 0 ? transfer : 0.0) + pin;
  double x_cores = cpu_per_batch > 0 && cores > 0 ? cores / cpu_per_batch : inf;
  double x = std::min({x_workers, x_main, x_pin, x_cores});
  if (x == x_workers) {
    out.bound = DataLoaderBound::kWorkers;
    name_data();
  } else if (x == x_cores) {
    out.bound = DataLoaderBound::kCores;
    name_data();
  } else if (x == x_pin) {
    out.bound = DataLoaderBound::kPinMemory;
    out.limiting_stage = p.pin_memory.name;
    out.limiting_kind = DataLoaderStageKind::kPinMemory;
  } else {
    out.bound = DataLoaderBound::kMainProcess;
    bool step_limits = step >= transfer;
    out.limiting_stage = step_limits ? p.step.name : p.transfer.name;
    out.limiting_kind = step_limits ? DataLoaderStageKind::kStep : DataLoaderStageKind::kTransfer;
  }
  // Batches in flight absorb the jitter between a worker's batch and the
  // consumer's; with few of them a slow batch leaves the consumer waiting. A
  // small charge, so that prefetch_factor=1 loses to 2 and deeper queues win
  // only ties (which the tuner resolves towards less memory).
  double in_flight = n * k.prefetch_factor;
  double efficiency = 1.0 - 0.04 / in_flight;
  out.steady_batches_per_second = x * efficiency;
  out.startup_seconds = StartupPerWorker(p) * n;
  double steady_time = epochs * batches_per_epoch / out.steady_batches_per_second;
  double startup_time = out.startup_seconds * (k.persistent_workers ? 1.0 : epochs);
  out.batches_per_second = epochs * batches_per_epoch / (steady_time + startup_time);
  if (startup_time > steady_time) {
    out.limiting_stage = "worker start-up";
    out.limiting_kind = DataLoaderStageKind::kStartup;
  }
  out.cores_used = std::min(cores > 0 ? cores : inf, out.steady_batches_per_second * cpu_per_batch);
  out.memory_bytes = p.main_rss_bytes + n * worker_rss + (in_flight + (k.pin_memory ? 1 : 0)) * p.batch_bytes;
  return out;
}

DataLoaderDiagnosis DiagnoseDataLoader(const DataLoaderProfile& profile) {
  DataLoaderDiagnosis d;
  d.profile = profile;
  d.cores = profile.host.UsableCores() > 0 ? profile.host.UsableCores() : 1.0;
  DataLoaderKnobs current = CurrentKnobs(profile.settings);
  d.predicted = PredictDataLoader(profile, current, d.cores);
  d.measured_batches_per_second = profile.MeasuredBatchesPerSecond();
  double total = profile.wait_seconds + profile.step_seconds;
  d.wait_fraction = total > 0 ? profile.wait_seconds / total : 0.0;
  switch (d.predicted.limiting_kind) {
    case DataLoaderStageKind::kStep:
      d.advice.push_back("the training step limits: more workers or prefetching will not help much");
      break;
    case DataLoaderStageKind::kStartup:
      d.advice.push_back("workers start again every epoch: persistent_workers=True starts them once");
      break;
    case DataLoaderStageKind::kTransfer:
      d.advice.push_back(
          "unpickling batches in the main process limits: smaller batches of fewer objects, or "
          "tensors instead of Python objects");
      break;
    case DataLoaderStageKind::kPinMemory:
      d.advice.push_back(profile.cuda_available
                             ? "pin_memory limits: pinning costs more than it saves here"
                             : "pin_memory=True without a GPU only costs time: turn it off");
      break;
    default: {
      DataLoaderKnobs more = current;
      more.num_workers = std::max(1, current.num_workers + 1);
      DataLoaderPrediction next = PredictDataLoader(profile, more, d.cores);
      d.advice.push_back(
          fmt::format("{} costs the most per batch; num_workers={} predicts {:.1f} batches/s "
                      "(now {:.1f}); `pipetune tune` solves for all the settings",
                      d.predicted.limiting_stage, more.num_workers, next.batches_per_second,
                      d.predicted.batches_per_second));
      break;
    }
  }
  if (profile.settings.pin_memory && !profile.cuda_available &&
      d.predicted.limiting_kind != DataLoaderStageKind::kPinMemory) {
    d.advice.push_back("pin_memory=True but no CUDA device: it only costs time");
  }
  return d;
}

}  // namespace pipetune::analyzer

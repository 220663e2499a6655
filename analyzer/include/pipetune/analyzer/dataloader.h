// A PyTorch DataLoader's rate model, diagnosis and report, over the
// profile that dataloader_trace.h reads.
//
// The model. Workers are a parallel stage: one batch costs a worker
// batch_size x (load + every transform) + collate, so N workers deliver at
// most N / that. The main process is a serial stage: per batch the training
// step plus the transfer (unpickling) of the batch; pin_memory, when on, runs
// in a thread of its own, another serial stage. With num_workers = 0 all of it
// runs serially in the main process. The cores bound every worker's and the
// main process's CPU together. prefetch_factor x num_workers batches are in
// flight: they cost memory and absorb jitter. Non-persistent workers start
// again every epoch. Memory is the main process's RSS, each worker's RSS and
// the batches in flight.
#pragma once

#include <string>
#include <vector>

#include "pipetune/analyzer/dataloader_trace.h"
#include "pipetune/analyzer/report.h"

namespace pipetune::analyzer {

struct DataLoaderKnobs {
  int num_workers = 0;
  int prefetch_factor = 2;
  bool persistent_workers = false;
  bool pin_memory = false;
  bool operator==(const DataLoaderKnobs&) const = default;
};

enum class DataLoaderBound { kSerial, kWorkers, kCores, kMainProcess, kPinMemory };
const char* DataLoaderBoundName(DataLoaderBound bound);

struct DataLoaderPrediction {
  double batches_per_second = 0;  // over an epoch, start-up included
  double steady_batches_per_second = 0;
  DataLoaderBound bound = DataLoaderBound::kSerial;
  std::string limiting_stage;  // a stage's name, or "worker start-up"
  DataLoaderStageKind limiting_kind = DataLoaderStageKind::kLoad;
  double startup_seconds = 0;  // per epoch (first epoch only when persistent)
  double memory_bytes = 0;
  double cores_used = 0;
};

// The model at `knobs` with `cores` cores.
DataLoaderPrediction PredictDataLoader(const DataLoaderProfile& profile, const DataLoaderKnobs& knobs,
                                       double cores);

DataLoaderKnobs CurrentKnobs(const DataLoaderSettings& settings);

struct DataLoaderDiagnosis {
  DataLoaderProfile profile;
  DataLoaderPrediction predicted;  // the model at the run's own settings
  double cores = 0;
  double measured_batches_per_second = 0;
  double wait_fraction = 0;  // of the consumer's time, waiting in next()
  std::vector<std::string> advice;
};

DataLoaderDiagnosis DiagnoseDataLoader(const DataLoaderProfile& profile);

// The report in every format `pipetune report` writes.
std::string RenderDataLoaderReport(const DataLoaderDiagnosis& diagnosis, ReportFormat format);

}  // namespace pipetune::analyzer

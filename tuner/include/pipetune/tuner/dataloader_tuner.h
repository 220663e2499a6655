// Tuning a PyTorch DataLoader: num_workers, prefetch_factor,
// persistent_workers and pin_memory under the CPU and memory budgets, by an
// exhaustive search of the DataLoader model (pipetune/analyzer/dataloader.h).
// Works on a profile only: it reads no file and runs nothing.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "pipetune/analyzer/dataloader.h"

namespace pipetune::tuner {

struct DataLoaderBudgets {
  double cores = 1;
  uint64_t memory_bytes = 0;  // for the main process, the workers and the batches in flight
  int max_workers = 16;
};

// What stops more throughput at the chosen settings.
enum class DataLoaderBinding { kModel, kMemory, kCores };
const char* DataLoaderBindingName(DataLoaderBinding binding);

struct DataLoaderPlan {
  analyzer::DataLoaderKnobs current;
  analyzer::DataLoaderKnobs knobs;
  analyzer::DataLoaderPrediction current_prediction;
  analyzer::DataLoaderPrediction predicted;
  DataLoaderBinding binding = DataLoaderBinding::kModel;
  DataLoaderBudgets budgets;
  int batch_size = 1;
  // Why, one sentence each (memory binds, pin_memory without a GPU, ...).
  std::vector<std::string> notes;
};

// The settings with the highest predicted throughput (start-up included)
// whose memory fits the budget. Ties (within 1%) go to fewer workers, fewer
// batches in flight, no pinning and the current persistence. When even
// num_workers=0 does not fit, the plan is num_workers=0 with a note.
DataLoaderPlan TuneDataLoader(const analyzer::DataLoaderProfile& profile, const DataLoaderBudgets& budgets);

// {"num_workers": N, "prefetch_factor": P, ...}: DataLoader keyword arguments.
nlohmann::json DataLoaderKwargs(const analyzer::DataLoaderKnobs& knobs);
// "DataLoader(dataset, ..., num_workers=3, prefetch_factor=2, ...)": the code change.
std::string DataLoaderCodeChange(const analyzer::DataLoaderKnobs& knobs);
std::string FormatDataLoaderPlanText(const DataLoaderPlan& plan);
nlohmann::json DataLoaderPlanToJson(const DataLoaderPlan& plan);

}  // namespace pipetune::tuner

// `pipetune tune TRACE` of a PyTorch DataLoader's run (dataloader_plan.cc;
// OpenRecording tells a DataLoader's): the job read, one plan for its
// planned rank, and the keyword arguments it writes (dataloader_kwargs.h).
#pragma once

#include <string>
#include <vector>

#include "pipetune/analyzer/dataloader_trace.h"
#include "pipetune/base/json.h"
#include "pipetune/base/status.h"
#include "pipetune/tuner/plan.h"
#include "pipetune/tuner/tune_input.h"

namespace pipetune::workflow {

struct DataLoaderTuneRequest {
  std::string trace;
  tuner::BudgetFlags budgets;  // cores and memory; unset: the traced host's (90% of its memory)
  tuner::Objective objective = tuner::Objective::kMax;
  std::string output;  // the kwargs JSON; empty: beside the trace as STEM.dataloader.json
};

struct DataLoaderTuneResult {
  analyzer::DataLoaderProfile run;
  tuner::Plan plan;               // the one solver's, over analyzer::DataLoaderModelProfile
  Json dataloader_kwargs;         // the plan's keyword arguments (DataLoaderKwargs), every rank's
  bool changes_settings = false;  // the plan's knobs differ from the traced run's
  std::string output;             // the JSON of keyword arguments written
  Json kwargs;                    // what it holds: dataloader_kwargs, and "ranks" when a rank has its own
  std::string code_change;
  // Said loudly (stderr) as well as in the plan's notes: an IterableDataset
  // the plan gives workers while its traced workers did not shard it.
  std::vector<std::string> warnings;
};

// Reads the run's traces, describes them to the model as stages, solves
// under the budgets (resolved as for a config: flags, then the traced host),
// writes the keyword arguments (as `pipetune profile --apply` reads them).
StatusOr<DataLoaderTuneResult> TuneDataLoaderTrace(const DataLoaderTuneRequest& request);
// The same without writing the keyword arguments (`output` says where they
// would go): `tune --engine` compares the engine with the tuned DataLoader.
StatusOr<DataLoaderTuneResult> PlanDataLoaderTrace(const DataLoaderTuneRequest& request);

}  // namespace pipetune::workflow

// A DataLoader's keyword arguments file (dataloader_kwargs.cc): the form
// the plan's settings leave in, checked when read back, and where it goes.
//   pipetune tune TRACE            (writes STEM.dataloader.json)
//   pipetune profile --apply STEM.dataloader.json -- python3 train.py
#pragma once

#include <string>

#include "pipetune/base/json.h"
#include "pipetune/base/status.h"
#include "pipetune/models/profile.h"
#include "pipetune/models/rate_model.h"
#include "pipetune/workflow/python_bootstrap.h"

namespace pipetune::workflow {

// Reads and checks a JSON file of DataLoader keyword arguments; and the
// same named to the recorder.
StatusOr<Json> ReadDataLoaderKwargs(const std::string& path);
StatusOr<ProgramSettings> DataLoaderSettingsFile(const std::string& path);

// What is specific to a DataLoader once the one model has planned: the
// keyword arguments the bootstrap applies, {"num_workers": N,
// "prefetch_factor": P or null, "persistent_workers": B, "pin_memory": B},
// written straight from a configuration of the DataLoader's model profile
// (analyzer::DataLoaderModelProfile names its knobs by these keys:
// models::KnobValues), and the one-line code change they stand for.
Json DataLoaderKwargs(const models::Profile& profile, const models::Configuration& config);
std::string DataLoaderCodeChange(const Json& kwargs);

// Where the kwargs go by default: TRACE's stem + ".dataloader.json".
std::string DataLoaderKwargsPath(const std::string& requested, const std::string& trace);

}  // namespace pipetune::workflow

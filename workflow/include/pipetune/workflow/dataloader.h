// PyTorch DataLoaders, as users run them (docs/pytorch.md):
//   pipetune profile [--apply TUNED.json] -- python3 train.py   (the bootstrap's environment)
//   pipetune report TRACE / pipetune tune TRACE                   (OpenRecording tells a DataLoader's)
//   pipetune tune TRACE --verify -- python3 train.py                  (run, tune, re-run applied, refit)
// The CLI parses flags and prints; everything else is here.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "pipetune/analyzer/dataloader_model.h"
#include "pipetune/base/json.h"
#include "pipetune/base/status.h"
#include "pipetune/models/rate_model.h"
#include "pipetune/tuner/plan.h"
#include "pipetune/tuner/tune_input.h"
#include "pipetune/workflow/dataloader_kwargs.h"
#include "pipetune/workflow/dataloader_plan.h"
#include "pipetune/workflow/dataloader_format.h"
#include "pipetune/workflow/dataloader_verify.h"
#include "pipetune/workflow/profile_program.h"
#include "pipetune/workflow/python_bootstrap.h"

namespace pipetune::workflow {

}  // namespace pipetune::workflow

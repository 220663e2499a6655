// Human-readable text for `pipetune run`: the live progress line and the
// summary printed at the end.
#pragma once

#include <string>

#include "pipetune/models/config.h"
#include "pipetune/runtime/pipeline.h"

namespace pipetune::cli {

// "  12.5 s  37.2 outputs/s  2381 examples/s  stall 12%  buffers 12.0 MiB"
std::string FormatProgress(const runtime::Progress& progress);

// A headline sentence and a per-stage table.
std::string FormatRunSummary(const models::PipelineConfig& config, const runtime::RunSummary& summary);

}  // namespace pipetune::cli

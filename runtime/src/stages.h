// Factories for every op's stage. Each reads its args with the models::Arg*
// accessors, so a bad value is an error naming the stage and key before any
// thread starts.
#pragma once

#include <memory>
#include <string>

#include "pipetune/base/status.h"
#include "pipetune/models/config.h"
#include "pipetune/runtime/function_registry.h"
#include "stage.h"

namespace pipetune::runtime {

// range, list_files (sources.cc).
StatusOr<std::unique_ptr<Stage>> MakeSourceStage(const models::StageConfig& config, RunState* run);

// map and read_file: `parallelism` workers (parallel_stage.cc).
StatusOr<std::unique_ptr<Stage>> MakeParallelStage(const models::StageConfig& config, RunState* run,
                                                   const FunctionRegistry& registry);

// filter, shuffle, batch, prefetch, take (sequential_stages.cc).
StatusOr<std::unique_ptr<Stage>> MakeSequentialStage(const models::StageConfig& config, RunState* run,
                                                     const FunctionRegistry& registry);

// repeat (sequential_stages.cc).
StatusOr<std::unique_ptr<Stage>> MakeRepeatStage(const models::StageConfig& config, RunState* run);

// cache (cache_stage.cc). `fingerprint` identifies what the stages up to and
// including the cache compute, so a disk cache written by another pipeline is
// not replayed.
StatusOr<std::unique_ptr<Stage>> MakeCacheStage(const models::StageConfig& config, RunState* run,
                                                uint64_t fingerprint);

// Resolves a config path (pattern, cache directory) against the build's
// base_dir; absolute paths stay as they are.
std::string ResolvePath(const RunState& run, const std::string& path);

}  // namespace pipetune::runtime

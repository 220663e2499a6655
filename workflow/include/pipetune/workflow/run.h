// Running a pipeline config, traced or not: the one place that brackets
// runtime::RunPipeline with a tracer session. `pipetune run`, the tuning
// loop, the CI gate and the benchmarks all run configs through here.
//
// Contract: at most one traced run at a time per process (the tracer has one
// session). The trace is closed before RunConfig returns, also when the run
// fails; a failed run leaves the trace of what ran up to the failure.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <string>

#include "pipetune/base/status.h"
#include "pipetune/models/config.h"
#include "pipetune/runtime/function_registry.h"
#include "pipetune/runtime/pipeline.h"

namespace pipetune::workflow {

struct RunConfigOptions {
  // Stop after this many seconds; 0: run until a finite pipeline ends.
  double seconds = 0;
  // Write a trace here; empty: untraced.
  std::string trace_path;
  // The config file the pipeline came from, if any: relative paths in the
  // config resolve against its directory (unless base_dir is set), and the
  // trace records its absolute path so that `tune` can write the tuned
  // config beside it and keep its relative paths naming the same files.
  std::string config_path;
  std::string base_dir;                                 // overrides the config file's directory
  const runtime::FunctionRegistry* registry = nullptr;  // null: the built-ins
  bool deterministic = false;
  std::function<void(const runtime::Progress&)> on_progress;
  const std::atomic<bool>* interrupt = nullptr;  // see runtime::RunOptions
  // Live tuning (autotune.h), see runtime::RunOptions.
  double progress_interval_s = 0.5;
  int resizable_workers = 0;
  std::function<void(runtime::Pipeline&)> on_start;
  // Tracer sampling; the tracer's defaults unless a benchmark asks otherwise.
  uint32_t snapshot_interval_ms = 100;
  uint32_t spans_per_stage_per_second = 200;
  uint32_t consumer_steps_per_second = 1000;
};

// The options of a traced run of `seconds` (0: until a finite pipeline
// ends) into `trace_path`, with the element functions of `registry` (null:
// the built-ins) and `on_progress` called as it runs. Every workflow that
// runs a config traced (verify's rounds, autotune, the gate's runs, the
// engine's calibration run) starts from these and sets what it adds.
RunConfigOptions TracedRunOptions(double seconds, const std::string& trace_path,
                                  const runtime::FunctionRegistry* registry = nullptr,
                                  std::function<void(const runtime::Progress&)> on_progress = {});

// Errors: the config does not build (kInvalidInput, naming stage and key), an
// element function fails (kFailed), the trace cannot be written (kIoError,
// naming the file).
StatusOr<runtime::RunSummary> RunConfig(const models::PipelineConfig& config,
                                        const RunConfigOptions& options);

// Loads CONFIG_PATH and runs it (config_path set from it).
StatusOr<runtime::RunSummary> RunConfigFile(const std::string& config_path, RunConfigOptions options);

// Directory part of a path ("." when it has none): relative paths in a config
// resolve against its file's directory.
std::string DirectoryOf(const std::string& path);

}  // namespace pipetune::workflow

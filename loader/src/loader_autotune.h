// pipetune.Loader's autotune=True (loader_c.h): the second driver of the
// online tuning loop (workflow/autotune_controller.h), the first being
// `pipetune autotune CONFIG`. A thread of its own steps the controller every
// 250 ms, so the training loop that pulls batches never waits for a refit;
// the loader builds each pipeline from the knobs decided so far and
// attaches it, so a pass rebuilt after a stop keeps them.
//
// Contract: Create starts the trace session (a temporary file unless the
// loader records one where the caller asked) and the driver; Finish stops
// the driver, judges or undoes a change still waiting, ends a temporary
// session and removes its file, and writes the settled config. Build,
// Detach, Finish and the readers run on the loader's caller thread.
#pragma once

#include <chrono>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "pipetune/base/status.h"
#include "pipetune/loader/loader_c.h"
#include "pipetune/models/config.h"
#include "pipetune/runtime/pipeline.h"
#include "pipetune/workflow/autotune_controller.h"

namespace pipetune::loader {

class LoaderAutotune {
 public:
  // `original`: the config as given (what is written, its repeat stages
  // kept); `running`: the loader's version of it, which the pipeline runs.
  // `traced`: the loader already records its trace at options.trace_path.
  // kInvalidInput naming the option: a bad budget, interval or output; kFailed:
  // no trace can be recorded (another session runs in this process).
  static StatusOr<std::unique_ptr<LoaderAutotune>> Create(const pipetune_loader_options& options,
                                                          models::PipelineConfig original,
                                                          const models::PipelineConfig& running, bool traced);
  // Stops the driver and a temporary trace; writes nothing (Finish does).
  ~LoaderAutotune();

  // A pipeline with the knobs decided so far, attached to the controller.
  StatusOr<std::unique_ptr<runtime::Pipeline>> Build(const runtime::BuildOptions& options);
  // Before the attached pipeline is destroyed.
  void Detach();
  // See pipetune_loader_autotune_finish; `written` gets the path ("" none).
  Status Finish(std::string* written);
  // The next decision as a JSON line, nullopt when none waits.
  std::optional<std::string> NextDecision();
  // The settled config so far (the original's stages, the decided knobs).
  std::string SettledConfigJson() const;

 private:
  LoaderAutotune() = default;
  void Drive();
  void StopDriver();
  void EndTemporaryTrace();

  models::PipelineConfig original_;
  std::string original_dir_;     // where the original's relative paths resolve ("" unknown)
  std::string original_label_;   // its file, or "<config>"
  std::string output_;           // "" not written
  std::string temporary_trace_;  // "" the caller's trace
  bool temporary_running_ = false;
  std::unique_ptr<workflow::AutotuneController> controller_;
  int resizable_workers_ = 0;
  runtime::Pipeline* attached_ = nullptr;  // the pipeline the loader runs now, if any

  std::chrono::steady_clock::time_point start_;
  std::thread driver_;
  std::mutex driver_mu_;  // stopping_, and the temporary trace's end
  std::condition_variable wake_;
  bool stopping_ = false;

  std::mutex decisions_mu_;
  std::deque<std::string> decisions_;
  bool finished_ = false;
  Status finish_status_ = Status::Ok();
  std::string written_;
};

}  // namespace pipetune::loader

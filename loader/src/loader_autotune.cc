#include "loader_autotune.h"

#include <fmt/format.h>
#include <stdlib.h>
#include <unistd.h>

#include <filesystem>
#include <utility>

#include "pipetune/base/json.h"
#include "pipetune/tracer/tracer.h"
#include "pipetune/workflow/run.h"
#include "pipetune/workflow/tune.h"

namespace pipetune::loader {
namespace {

namespace fs = std::filesystem;

// How often the driver steps the controller (as `pipetune autotune`'s run does).
constexpr auto kTick = std::chrono::milliseconds(250);

StatusOr<workflow::AutotuneControllerOptions> ControllerOptions(const pipetune_loader_options& options) {
  workflow::AutotuneControllerOptions out;
  if (options.autotune_refit_seconds < 0) {
    return InvalidInput(
        fmt::format("autotune_refit_seconds: must be > 0 seconds, got {}", options.autotune_refit_seconds));
  }
  if (options.autotune_refit_seconds > 0) out.refit_every_seconds = options.autotune_refit_seconds;
  if (options.autotune_cores < 0)
    return InvalidInput(fmt::format("autotune_cores: must be > 0, got {}", options.autotune_cores));
  if (options.autotune_cores > 0) out.budgets.cores = options.autotune_cores;
  if (options.autotune_memory > 0) out.budgets.memory_bytes = options.autotune_memory;
  if (options.autotune_max_threads < 0) {
    return InvalidInput(
        fmt::format("autotune_max_threads: must be > 0, got {}", options.autotune_max_threads));
  }
  if (options.autotune_max_threads > 0) out.budgets.max_threads = options.autotune_max_threads;
  PIPETUNE_RETURN_IF_ERROR(workflow::ValidateControllerOptions(out));
  return out;
}

// The settled config's file: the caller's ("" none), else beside the
// config; its folder must exist now rather than fail when the training has
// ended.
StatusOr<std::string> OutputPath(const pipetune_loader_options& options) {
  if (options.autotune_output != nullptr && *options.autotune_output == '\0') return std::string();
  std::string output = options.autotune_output != nullptr ? options.autotune_output : "";
  if (output.empty() && options.config_path != nullptr && *options.config_path != '\0')
    output = workflow::AutotunedConfigPath(options.config_path);
  if (output.empty()) return output;
  fs::path folder = fs::path(output).parent_path();
  std::error_code error;
  if (!folder.empty() && !fs::is_directory(folder, error)) {
    return InvalidInput(
        fmt::format("autotune_output: {}: its folder {} does not exist", output, folder.string()));
  }
  return output;
}

// A trace file of the loader's own, in the temporary folder.
StatusOr<std::string> StartTemporaryTrace(const models::PipelineConfig& running,
                                          const std::string& config_path) {
  std::string path = (fs::temp_directory_path() / "pipetune-loader-autotune-XXXXXX").string();
  int fd = mkstemp(path.data());
  if (fd < 0) return Status(StatusCode::kIoError, "autotune: cannot create a temporary trace in " + path);
  close(fd);
  tracer::SessionOptions session;
  session.path = path;
  session.pipeline_name = running.name;
  session.config_json = models::Serialize(running);
  session.config_path = config_path;
  Status started = tracer::Start(session);
  if (!started.ok()) {
    fs::remove(path);
    return Status(StatusCode::kFailed,
                  "autotune needs the loader's own trace, and this process records one already (another "
                  "Loader, or a DataLoader under pipetune profile): " +
                      started.message());
  }
  return path;
}

}  // namespace

StatusOr<std::unique_ptr<LoaderAutotune>> LoaderAutotune::Create(const pipetune_loader_options& options,
                                                                 models::PipelineConfig original,
                                                                 const models::PipelineConfig& running,
                                                                 bool traced) {
  PIPETUNE_ASSIGN_OR_RETURN(workflow::AutotuneControllerOptions controller_options,
                            ControllerOptions(options));
  std::unique_ptr<LoaderAutotune> tune(new LoaderAutotune());
  PIPETUNE_ASSIGN_OR_RETURN(tune->output_, OutputPath(options));
  const std::string config_path = options.config_path != nullptr ? options.config_path : "";
  tune->original_ = std::move(original);
  tune->original_dir_ = config_path.empty() ? "" : workflow::DirectoryOf(config_path);
  tune->original_label_ = config_path.empty() ? "<config>" : config_path;
  std::string trace_path;
  if (traced) {
    trace_path = options.trace_path;
  } else {
    PIPETUNE_ASSIGN_OR_RETURN(trace_path, StartTemporaryTrace(running, config_path));
    tune->temporary_trace_ = trace_path;
    tune->temporary_running_ = true;
  }
  tune->resizable_workers_ = workflow::ResizableWorkers(controller_options.budgets);
  LoaderAutotune* self = tune.get();
  controller_options.on_decision = [self](const workflow::AutotuneDecision& decision) {
    std::lock_guard<std::mutex> lock(self->decisions_mu_);
    self->decisions_.push_back(DumpJson(workflow::DecisionToJson(decision)));
  };
  tune->controller_ = std::make_unique<workflow::AutotuneController>(std::move(controller_options), running,
                                                                     trace_path, config_path);
  tune->start_ = std::chrono::steady_clock::now();
  tune->driver_ = std::thread([self] { self->Drive(); });
  return tune;
}

LoaderAutotune::~LoaderAutotune() {
  StopDriver();
  EndTemporaryTrace();
  if (controller_ != nullptr) Detach();  // null: Create failed before it
}

StatusOr<std::unique_ptr<runtime::Pipeline>> LoaderAutotune::Build(const runtime::BuildOptions& options) {
  runtime::BuildOptions resizable = options;
  resizable.resizable_workers = resizable_workers_;
  models::PipelineConfig knobs = controller_->CurrentConfig();
  PIPETUNE_ASSIGN_OR_RETURN(std::unique_ptr<runtime::Pipeline> pipeline,
                            runtime::Pipeline::Create(knobs, resizable));
  controller_->Attach(pipeline.get(), knobs);
  attached_ = pipeline.get();
  return pipeline;
}

void LoaderAutotune::Detach() {
  attached_ = nullptr;
  controller_->Attach(nullptr, {});
}

void LoaderAutotune::Drive() {
  std::unique_lock<std::mutex> lock(driver_mu_);
  while (!stopping_) {
    wake_.wait_for(lock, kTick, [this] { return stopping_; });
    if (stopping_) break;
    lock.unlock();
    controller_->Step(std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count());
    // Settled: no refit runs again, so the driver ends, and a temporary trace
    // need not be recorded any longer (its cost leaves the training loop).
    if (controller_->settled()) {
      EndTemporaryTrace();
      return;
    }
    lock.lock();
  }
}

void LoaderAutotune::StopDriver() {
  {
    std::lock_guard<std::mutex> lock(driver_mu_);
    stopping_ = true;
  }
  wake_.notify_all();
  if (driver_.joinable()) driver_.join();
}

void LoaderAutotune::EndTemporaryTrace() {
  if (!temporary_running_) return;
  temporary_running_ = false;
  (void)tracer::Stop();  // the trace is thrown away: its write errors do not matter
  std::error_code ignored;
  fs::remove(temporary_trace_, ignored);
}

Status LoaderAutotune::Finish(std::string* written) {
  if (finished_) {
    *written = written_;
    return finish_status_;
  }
  finished_ = true;
  StopDriver();
  // The controller's Finish detaches; the pipeline still running (the
  // caller may go on) is attached again, with what Finish undid applied.
  models::PipelineConfig running = controller_->CurrentConfig();
  controller_->Finish();
  if (attached_ != nullptr) controller_->Attach(attached_, running);
  EndTemporaryTrace();
  finish_status_ = Status::Ok();
  if (!output_.empty()) {
    StatusOr<workflow::TunedConfig> saved =
        workflow::WriteTunedConfig(original_, controller_->SettledOn(original_), original_dir_,
                                   original_label_, output_, /*with_diff=*/false);
    if (saved.ok()) {
      written_ = saved->path;
    } else {
      finish_status_ = saved.status();
    }
  }
  *written = written_;
  return finish_status_;
}

std::optional<std::string> LoaderAutotune::NextDecision() {
  std::lock_guard<std::mutex> lock(decisions_mu_);
  if (decisions_.empty()) return std::nullopt;
  std::string line = std::move(decisions_.front());
  decisions_.pop_front();
  return line;
}

std::string LoaderAutotune::SettledConfigJson() const {
  return models::Serialize(controller_->SettledOn(original_));
}

}  // namespace pipetune::loader

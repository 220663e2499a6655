// Building a pipeline from its config, and the pull API over it.
#include "pipetune/runtime/pipeline.h"

#include <fmt/format.h>
#include <pthread.h>

#include <algorithm>
#include <system_error>
#include <thread>

#include "pipetune/base/check.h"
#include "pipetune/base/json.h"
#include "pipetune/base/text.h"
#include "stages.h"

namespace pipetune::runtime {
namespace {

// What the stages up to and including `index` compute (op, fn, args,
// random), hashed with FNV-1a: a disk cache is reused only by a pipeline
// whose stages before it compute the same thing. Knobs do not count.
uint64_t Fingerprint(const models::PipelineConfig& config, size_t index) {
  Json what = Json::array();
  for (size_t i = 0; i <= index; ++i) {
    const models::StageConfig& stage = config.stages[i];
    Json one = Json::object();
    one["op"] = models::OpName(stage.op);
    one["fn"] = stage.fn;
    one["args"] = stage.args;
    one["random"] = stage.random;
    what.push_back(std::move(one));
  }
  return Fnv1a64(DumpJson(what));
}

StatusOr<std::unique_ptr<Stage>> MakeStage(const models::PipelineConfig& config, size_t index, RunState* run,
                                           const FunctionRegistry& registry) {
  const models::StageConfig& stage = config.stages[index];
  using models::Op;
  switch (stage.op) {
    case Op::kRange:
    case Op::kListFiles:
      return MakeSourceStage(stage, run);
    case Op::kReadFile:
    case Op::kMap:
      return MakeParallelStage(stage, run, registry);
    case Op::kRepeat:
      return MakeRepeatStage(stage, run);
    case Op::kCache:
      return MakeCacheStage(stage, run, Fingerprint(config, index));
    case Op::kFilter:
    case Op::kShuffle:
    case Op::kBatch:
    case Op::kPrefetch:
    case Op::kTake:
      return MakeSequentialStage(stage, run, registry);
  }
  return InvalidInput(models::StageKeyError(stage, "op", "unknown op"));
}

}  // namespace

class PipelineImpl {
 public:
  explicit PipelineImpl(const BuildOptions& options) : run_(std::make_unique<RunState>(options)) {}
  ~PipelineImpl() { Stop(); }

  Status Build(const models::PipelineConfig& config) {
    PIPETUNE_RETURN_IF_ERROR(models::Validate(config));
    // A program that embeds the engine is traced when PIPETUNE_TRACE names a
    // file (`pipetune profile`); a running session just learns the config.
    tracer::SessionOptions session;
    session.pipeline_name = config.name;
    session.config_json = models::Serialize(config);
    Status traced = tracer::StartFromEnvironment(session);
    if (!traced.ok()) run_->Note("tracing is off: " + traced.message());
    const FunctionRegistry& registry =
        run_->options().registry != nullptr ? *run_->options().registry : FunctionRegistry::Builtins();
    for (size_t i = 0; i < config.stages.size(); ++i) {
      auto made = MakeStage(config, i, run_.get(), registry);
      // Building an element function checks its args: name the file as every
      // other config error does.
      if (!made.ok()) return config.source.empty() ? made.status() : made.status().WithContext(config.source);
      auto stage = std::move(*made);
      stage->AllocateCounters();
      stages_.push_back(std::move(stage));
    }
    // Stage i's output is stage i+1's input; the last one's is the consumer's.
    for (size_t i = 0; i < stages_.size(); ++i) {
      // Built for the most workers the next stage may have (a resizable
      // stage's queue is shared from the start), told how many run now.
      int consumers = i + 1 < stages_.size() ? stages_[i + 1]->max_workers() : 1;
      stages_[i]->SetOutput(std::make_unique<Queue>(stages_[i]->OutputLimits(), consumers, &run_->buffers(),
                                                    stages_[i]->trace_id()));
      if (i + 1 < stages_.size()) stages_[i]->output()->SetConsumers(stages_[i + 1]->workers());
      if (i > 0) stages_[i]->Connect(stages_[i - 1].get(), stages_[i - 1]->output());
    }
    run_->SetStopHandler([this] {
      for (auto& stage : stages_) stage->output()->Close();
      for (auto& stage : stages_) stage->Shutdown();
    });
    return Status::Ok();
  }

  void Start() {
    StartThreads();
    if (!requested_) {
      requested_ = true;
      stages_.back()->RequestPass(0);
    }
  }

  void StartEpoch(uint32_t epoch) {
    StartThreads();
    requested_ = true;
    epoch_by_epoch_ = true;
    if (!finished_) stages_.back()->RequestPass(epoch);
  }

  void StartThreads() {
    std::lock_guard<std::mutex> lock(stop_mu_);
    StartThreadsLocked();
  }

  Status SetParallelism(const std::string& name, int parallelism) {
    std::lock_guard<std::mutex> lock(stop_mu_);
    PIPETUNE_ASSIGN_OR_RETURN(size_t index, FindStage(name));
    Stage& stage = *stages_[index];
    if (!models::OpIsParallel(stage.config().op)) {
      return InvalidInput(models::StageKeyError(stage.config(), "parallelism",
                                                "only map and read_file stages "
                                                "have workers to resize"));
    }
    if (parallelism < 1 || parallelism > stage.max_workers()) {
      return InvalidInput(models::StageKeyError(
          stage.config(), "parallelism",
          fmt::format("can be resized to 1..{} while running (BuildOptions::resizable_workers), got {}",
                      stage.max_workers(), parallelism)));
    }
    if (joined_) return Status::Ok();
    // Started first, so that the stage's first Resize is the start's.
    StartThreadsLocked();
    tracer::SetParallelism(stage.trace_id(), static_cast<uint32_t>(parallelism));
    LaunchWorkers(stage, stage.Resize(parallelism));
    return Status::Ok();
  }

  Status SetBuffer(const std::string& name, int64_t buffer) {
    std::lock_guard<std::mutex> lock(stop_mu_);
    PIPETUNE_ASSIGN_OR_RETURN(size_t index, FindStage(name));
    Stage& stage = *stages_[index];
    if (stage.config().op != models::Op::kPrefetch) {
      return InvalidInput(
          models::StageKeyError(stage.config(), "buffer", "only prefetch stages have a buffer"));
    }
    if (buffer < 1) return InvalidInput(models::StageKeyError(stage.config(), "buffer", "must be >= 1"));
    if (!joined_) stage.output()->SetMaxElements(static_cast<size_t>(buffer));
    return Status::Ok();
  }

  // timeout_ms < 0: wait as long as it takes.  // timeout_ms < 0: wait as long as it takes.
  StatusOr<bool> Next(Element* out, int64_t timeout_ms, bool* timed_out) {
    if (finished_) return Finished();
    Start();
    while (true) {
      if (pos_ < in_.size()) {
        Item& item = in_[pos_++];
        if (item.end_of_pass) {  // the end of the one pass we asked for
          if (!epoch_by_epoch_) Stop();
          return false;
        }
        *out = std::move(item.element);
        return true;
      }
      in_.clear();
      pos_ = 0;
      uint64_t now = 0, waited = 0;
      // Out of a prefetch buffer one at a time: what it holds is what it was
      // told to hold, not moved here in bulk.
      size_t take = stages_.back()->config().op == models::Op::kPrefetch ? 1 : kChunkItems;
      Queue::PopResult popped =
          stages_.back()->output()->Pop(in_, take, /*block=*/true, now, &waited, timeout_ms);
      if (popped.status == Queue::PopStatus::kClosed) {
        Stop();
        return Finished();
      }
      if (popped.status == Queue::PopStatus::kEmpty) {
        *timed_out = true;
        return false;
      }
    }
  }

  void Stop() {
    std::lock_guard<std::mutex> lock(stop_mu_);
    finished_ = true;
    if (joined_) return;
    joined_ = true;  // no thread starts from here on (SetParallelism)
    run_->StopAll();
    for (std::thread& thread : threads_) thread.join();
    threads_.clear();
    for (auto& stage : stages_) tracer::RetireStage(stage->trace_id());
  }

  RunState& run() { return *run_; }

 private:
  StatusOr<size_t> FindStage(const std::string& name) const {
    for (size_t i = 0; i < stages_.size(); ++i) {
      if (stages_[i]->config().name == name) return i;
    }
    return InvalidInput(fmt::format("no stage \"{}\" in the pipeline", name));
  }

  // Under stop_mu_.
  void StartThreadsLocked() {
    if (started_ || joined_) return;
    started_ = true;
    for (auto& stage : stages_) {
      if (!LaunchWorkers(*stage, stage->Resize(stage->workers()))) return;
    }
  }

  // Starts the stage's workers `indices`. Under stop_mu_. False: out of
  // threads, and the run has failed with the reason.
  bool LaunchWorkers(Stage& target, const std::vector<int>& indices) {
    Stage* stage = &target;
    for (int i : indices) {
      try {
        threads_.emplace_back([stage, i] {
          // Thread names show up in debuggers, top -H and perf.
          std::string name = stage->config().name.substr(0, 12);
          if (stage->max_workers() > 1) name += fmt::format("/{}", i);
          pthread_setname_np(pthread_self(), name.substr(0, 15).c_str());
          stage->RunWorker(i);
        });
      } catch (const std::system_error& e) {
        // Out of threads: the run fails, with the reason, instead of the
        // exception leaving the library.
        run_->Fail(Failed(models::StageKeyError(stage->config(), "parallelism",
                                                fmt::format("cannot start worker {}: {}", i + 1, e.what()))));
        return false;
      }
    }
    return true;
  }

 public:
  const std::vector<std::unique_ptr<Stage>>& stages() const { return stages_; }

 private:
  StatusOr<bool> Finished() {
    Status error = run_->error();
    if (!error.ok()) return error;
    return false;
  }

  // Declared first: destroyed last, after the stages that report to it.
  std::unique_ptr<RunState> run_;
  std::vector<std::unique_ptr<Stage>> stages_;
  // Every worker thread started (one that left a resized stage stays here
  // until Stop joins it). Under stop_mu_.
  std::vector<std::thread> threads_;
  bool started_ = false;
  bool requested_ = false;       // a pass was asked for
  bool epoch_by_epoch_ = false;  // StartEpoch: the pipeline outlives a pass
  std::atomic<bool> finished_{false};
  std::mutex stop_mu_;
  bool joined_ = false;
  // The consumer's side of the last buffer.
  std::vector<Item> in_;
  size_t pos_ = 0;
};

Pipeline::Pipeline(std::unique_ptr<PipelineImpl> impl) : impl_(std::move(impl)) {}
Pipeline::~Pipeline() = default;

StatusOr<std::unique_ptr<Pipeline>> Pipeline::Create(const models::PipelineConfig& config,
                                                     const BuildOptions& options) {
  auto impl = std::make_unique<PipelineImpl>(options);
  PIPETUNE_RETURN_IF_ERROR(impl->Build(config));
  return std::unique_ptr<Pipeline>(new Pipeline(std::move(impl)));
}

StatusOr<std::unique_ptr<Pipeline>> Pipeline::Create(const models::PipelineConfig& config,
                                                     const FunctionRegistry* registry) {
  BuildOptions options;
  options.registry = registry;
  return Create(config, options);
}

void Pipeline::Start() { impl_->Start(); }
void Pipeline::StartEpoch(uint32_t epoch) { impl_->StartEpoch(epoch); }
StatusOr<bool> Pipeline::Next(Element* out) {
  bool timed_out = false;
  return impl_->Next(out, -1, &timed_out);
}
StatusOr<bool> Pipeline::NextFor(Element* out, int64_t timeout_ms, bool* timed_out) {
  *timed_out = false;
  return impl_->Next(out, std::max<int64_t>(timeout_ms, 0), timed_out);
}
void Pipeline::Stop() { impl_->Stop(); }
Status Pipeline::SetParallelism(const std::string& stage, int parallelism) {
  return impl_->SetParallelism(stage, parallelism);
}
Status Pipeline::SetBuffer(const std::string& stage, int64_t buffer) {
  return impl_->SetBuffer(stage, buffer);
}

std::vector<StageSummary> Pipeline::StageSummaries() const {
  std::vector<StageSummary> out;
  for (const auto& stage : impl_->stages()) out.push_back(stage->Summary());
  return out;
}

uint64_t Pipeline::PeakBufferBytes() const { return impl_->run().buffers().peak(); }
uint64_t Pipeline::BufferBytes() const { return impl_->run().buffers().current(); }
uint64_t Pipeline::CacheBytes() const { return impl_->run().cache().current(); }
uint64_t Pipeline::DiskCacheBytes() const {
  return impl_->run().disk_cache_bytes().load(std::memory_order_relaxed);
}
uint64_t Pipeline::FailedElements() const {
  uint64_t failed = 0;
  for (const auto& stage : impl_->stages()) failed += stage->Summary().failed;
  return failed;
}
std::vector<std::string> Pipeline::Errors() const { return impl_->run().errors(); }
std::optional<uint64_t> Pipeline::SourceElementsPerPass() const {
  return impl_->stages().front()->ElementsPerPass();
}

}  // namespace pipetune::runtime

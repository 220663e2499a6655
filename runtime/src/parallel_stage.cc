// `map` and `read_file`: a function applied to every element by
// `parallelism` worker threads that share one input buffer.
//
// Order. By default each worker passes its results on as they finish, so
// with more than one worker the output order may differ from the input
// order. When deterministic (BuildOptions::deterministic, or the stage arg
// "deterministic": true) every result waits in a reorder buffer, keyed by
// the sequence number its input was popped with, until the results before it
// have gone out; a window bounds how far ahead workers may run.
//
// Pass boundaries. The worker that pops an end-of-pass marker pauses the
// input (Queue pauses on a popped marker), waits until every element popped
// before it has been passed on (Queue::WaitOutstanding), forwards the marker
// and resumes the input: no element crosses into the wrong pass.
#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <map>
#include <optional>

#include "image_buffers.h"
#include "stages.h"

namespace pipetune::runtime {
namespace {

// Far more than any machine has cores: enough for latency-bound stages
// (1000 workers keep 10000 requests of 100 ms each in flight per second).
constexpr int kMaxWorkers = 4096;

// read_file's work: the whole file into a kBytes payload, one allocation.
class ReadFileFunction : public MapFunction {
 public:
  Status Apply(Element& element, const FnContext&) const override {
    int fd = ::open(element.path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return Failed(fmt::format("cannot open: {}", std::strerror(errno)));
    struct stat st {};
    if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
      ::close(fd);
      return Failed("not a regular file");
    }
    // A recycled buffer (image_buffers.h): a fresh vector would zero-fill
    // every byte before read() overwrites it, ~1% of an image pipeline's
    // CPU; a recycled one zero-fills at most what this file has beyond the
    // buffer's last size.
    auto data = image::AcquireBuffer(static_cast<size_t>(st.st_size));
    size_t done = 0;
    while (done < data->size()) {
      ssize_t n = ::read(fd, data->data() + done, data->size() - done);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) {
        int err = errno;
        ::close(fd);
        return Failed(fmt::format("cannot read: {}", std::strerror(err)));
      }
      if (n == 0) break;  // the file shrank while we read it
      done += static_cast<size_t>(n);
    }
    ::close(fd);
    data->resize(done);
    element.dtype = DType::kBytes;
    element.shape = {0, 0, 0};
    element.data = std::move(data);
    return Status::Ok();
  }
};

class ParallelStage : public Stage {
 public:
  ParallelStage(const models::StageConfig& config, RunState* run, std::unique_ptr<MapFunction> fn,
                bool deterministic, int max_workers)
      : Stage(config, run),
        fn_(std::move(fn)),
        max_workers_(std::max({config.parallelism, max_workers, 1})),
        active_(std::max(config.parallelism, 1)),
        deterministic_(deterministic && max_workers_ > 1),
        running_(static_cast<size_t>(max_workers_), false) {}

  int workers() const override { return active_.load(std::memory_order_relaxed); }
  int max_workers() const override { return max_workers_; }

  std::vector<int> Resize(int workers) override {
    std::vector<int> start;
    {
      std::lock_guard<std::mutex> lock(mu_);
      active_.store(std::clamp(workers, 1, max_workers_), std::memory_order_relaxed);
      for (int i = 0; i < this->workers(); ++i) {
        if (running_[i]) continue;
        running_[i] = true;
        start.push_back(i);
      }
      window_cv_.notify_all();  // the reorder window follows the count
    }
    input_->SetConsumers(this->workers());
    return start;
  }

  void Shutdown() override {
    std::lock_guard<std::mutex> lock(mu_);
    window_cv_.notify_all();
  }

  // A worker above the active count leaves; one that finds the stage grown
  // back to it while it was leaving stays (no Resize started another).
  void RunWorker(int index) override {
    while (Work(index)) {
      std::lock_guard<std::mutex> lock(mu_);
      if (index < workers() && !run_->stopping()) continue;
      running_[index] = false;
      return;
    }
  }

 private:
  // Runs elements until the pipeline stops (false) or the stage no longer
  // counts this worker (true): it then holds nothing, its output flushed and
  // its inputs reported done, so no element is stranded.
  bool Work(int index) {
    StageWorker worker(*this, index);
    if (deterministic_) {
      worker.set_report_done(false);  // the reorder path reports
      worker.set_max_chunk(1);        // see WaitForWindow
    }
    Item item;
    while (true) {
      if (index >= workers() && !worker.HoldsInput()) return worker.Flush();
      if (deterministic_ && !WaitForWindow()) return false;
      StageWorker::Input input = worker.Next(&item);
      if (input == StageWorker::Input::kClosed) return false;
      if (input == StageWorker::Input::kEndOfPass) {
        if (!ForwardEndOfPass(worker)) return false;
        continue;
      }
      if (!Process(worker, std::move(item.element))) return false;
    }
  }

  // Runs the function on one element and passes the result on; false when
  // the pipeline stops.
  bool Process(StageWorker& worker, Element&& element) {
    uint64_t begin = worker.now_ns;
    uint64_t seq = worker.seq();
    FnContext context{ElementSeed(config_.index, element.id, element.epoch, run_->options().seed)};
    Status status = ApplyGuarded(*fn_, element, context);
    worker.WorkDone(begin, element.id);
    if (!status.ok()) {
      run_->RecordFailure(config_, element, status);
      if (config_.on_error == models::OnError::kStop) return false;
      worker.CountFailed();
      return deterministic_ ? Complete(worker, seq, std::nullopt) : true;
    }
    if (deterministic_) return Complete(worker, seq, std::move(element));
    return worker.Emit(std::move(element));
  }

  bool ForwardEndOfPass(StageWorker& worker) {
    if (!worker.Flush()) return false;
    input_->WaitOutstanding();
    if (run_->stopping()) return false;
    if (deterministic_) {
      std::lock_guard<std::mutex> lock(mu_);
      next_emit_ = worker.seq() + 1;  // the marker used a sequence number too
    }
    bool ok = worker.EmitEndOfPass();
    input_->Resume();
    return ok;
  }

  // Deterministic mode: a worker pops (one element at a time, so it never
  // holds the element everyone waits for while it waits here) only while the
  // reorder buffer has room.
  bool WaitForWindow() {
    std::unique_lock<std::mutex> lock(mu_);
    // The window follows the workers running now.
    window_cv_.wait(lock, [this] { return reorder_.size() < Window() || run_->stopping(); });
    return !run_->stopping();
  }

  // Files the result for `seq` (nullopt: dropped) and sends on whatever run
  // of results is now complete.
  bool Complete(StageWorker& worker, uint64_t seq, std::optional<Element> element) {
    int64_t bytes = element ? static_cast<int64_t>(element->ByteSize()) : 0;
    {
      std::lock_guard<std::mutex> lock(mu_);
      reorder_.emplace(seq, std::move(element));
    }
    AccountState(bytes);
    return Drain(worker);
  }

  // One worker at a time sends; a worker that finds another sending leaves
  // its result for that one, which looks again before it lets go.
  bool Drain(StageWorker& worker) {
    while (true) {
      std::unique_lock<std::mutex> sending(send_mu_, std::try_to_lock);
      if (!sending.owns_lock()) return true;
      while (true) {
        std::vector<Item> chunk;
        size_t taken = 0;
        int64_t bytes = 0;
        {
          std::lock_guard<std::mutex> lock(mu_);
          for (auto it = reorder_.begin(); it != reorder_.end() && it->first == next_emit_;
               it = reorder_.erase(it)) {
            ++next_emit_;
            ++taken;
            if (!it->second) continue;
            Item& out = chunk.emplace_back();
            out.bytes = it->second->ByteSize();
            bytes += static_cast<int64_t>(out.bytes);
            out.element = std::move(*it->second);
          }
          if (taken > 0) window_cv_.notify_all();
        }
        if (taken == 0) break;
        AccountState(-bytes);
        if (!chunk.empty() && !worker.PushChunk(chunk)) return false;
        input_->Done(taken);
      }
      sending.unlock();
      std::lock_guard<std::mutex> lock(mu_);
      if (reorder_.empty() || reorder_.begin()->first != next_emit_) return true;
    }
  }

  size_t Window() const { return static_cast<size_t>(4 * workers() + 16); }

  const std::unique_ptr<MapFunction> fn_;
  const int max_workers_;
  std::atomic<int> active_;  // workers taking input; changed under mu_
  const bool deterministic_;

  std::mutex mu_;  // reorder state, and which workers run
  std::condition_variable window_cv_;
  std::vector<bool> running_;  // per worker index: a thread runs it (under mu_)
  std::map<uint64_t, std::optional<Element>> reorder_;
  uint64_t next_emit_ = 0;
  std::mutex send_mu_;
};

}  // namespace

StatusOr<std::unique_ptr<Stage>> MakeParallelStage(const models::StageConfig& config, RunState* run,
                                                   const FunctionRegistry& registry) {
  if (config.parallelism > kMaxWorkers) {
    return InvalidInput(models::StageKeyError(
        config, "parallelism",
        fmt::format("at most {} worker threads, got {}", kMaxWorkers, config.parallelism)));
  }
  PIPETUNE_ASSIGN_OR_RETURN(auto deterministic_arg, models::ArgBool(config, "deterministic"));
  bool deterministic = run->options().deterministic || deterministic_arg.value_or(false);
  std::unique_ptr<MapFunction> fn;
  if (config.op == models::Op::kReadFile) {
    fn = std::make_unique<ReadFileFunction>();
  } else {
    PIPETUNE_ASSIGN_OR_RETURN(fn, registry.MakeMap(config));
  }
  int resizable = run->options().resizable_workers;
  if (resizable > kMaxWorkers) {
    return InvalidInput(
        fmt::format("at most {} worker threads per stage may be resized to, got {}", kMaxWorkers, resizable));
  }
  return std::unique_ptr<Stage>(new ParallelStage(config, run, std::move(fn), deterministic, resizable));
}

}  // namespace pipetune::runtime

// RunPipeline: the consumer loop (docs/runtime.md, the consumer) over a Pipeline,
// a monitor thread for the time limit and progress, and the run summary.
#include <time.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <thread>
#include <vector>

#include "pipetune/runtime/pipeline.h"
#include "pipetune/tracer/tracer.h"

namespace pipetune::runtime {
namespace {

// Source elements inside an output: a batch counts its members.
uint64_t Examples(const Element& element) {
  if (element.items.empty()) return 1;
  uint64_t total = 0;
  for (const Element& item : element.items) total += Examples(item);
  return total;
}

void SleepUntilNs(uint64_t deadline_ns) {
  timespec ts;
  ts.tv_sec = static_cast<time_t>(deadline_ns / 1000000000u);
  ts.tv_nsec = static_cast<long>(deadline_ns % 1000000000u);
  while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, nullptr) == EINTR) {
  }
}

// How often the monitor looks at RunOptions::interrupt.
constexpr uint64_t kInterruptPollNs = 100'000'000;

class ConsumerLoop {
 public:
  ConsumerLoop(Pipeline& pipeline, const models::ConsumerConfig& consumer, const RunOptions& options)
      : pipeline_(pipeline), options_(options) {
    if (consumer.step_time_ms && *consumer.step_time_ms > 0) {
      step_ns_ = static_cast<uint64_t>(*consumer.step_time_ms * 1e6);
    }
  }

  StatusOr<RunSummary> Run() {
    start_ns_ = tracer::NowNs();
    if (options_.max_seconds > 0) {
      deadline_ns_ = start_ns_ + static_cast<uint64_t>(options_.max_seconds * 1e9);
    }
    std::thread monitor;
    if (deadline_ns_ != 0 || options_.on_progress || options_.interrupt != nullptr) {
      monitor = std::thread([this] { Monitor(); });
    }
    Status status = Consume();
    uint64_t end_ns = tracer::NowNs();
    pipeline_.Stop();
    {
      std::lock_guard<std::mutex> lock(mu_);
      done_ = true;
    }
    cv_.notify_all();
    if (monitor.joinable()) monitor.join();
    if (!status.ok()) return status;
    return Summarize(end_ns);
  }

 private:
  Status Consume() {
    Element element;
    uint64_t t = start_ns_;
    while (true) {
      StatusOr<bool> next = pipeline_.Next(&element);
      uint64_t got = tracer::NowNs();
      if (!next.ok()) return next.status();
      if (!*next) {
        // The monitor stopped us at the time limit or on an interrupt, or
        // the data ended.
        stopped_early_ = (deadline_ns_ != 0 && got >= deadline_ns_) || interrupted_.load();
        return Status::Ok();
      }
      uint64_t wait = got - t;
      wait_ns_.fetch_add(wait, std::memory_order_relaxed);
      const uint64_t examples =
          examples_.fetch_add(Examples(element), std::memory_order_relaxed) + Examples(element);
      outputs_.fetch_add(1, std::memory_order_relaxed);
      RecordOutput(got, examples);
      if (options_.on_output) options_.on_output(element);
      if (step_ns_ > 0) {
        uint64_t until = got + step_ns_;
        if (deadline_ns_ != 0) until = std::min(until, deadline_ns_);
        SleepUntilNs(until);
      }
      t = tracer::NowNs();
      tracer::ConsumerStep(wait, t - got, t);
      if ((deadline_ns_ != 0 && t >= deadline_ns_) || interrupted_.load()) {
        stopped_early_ = true;
        return Status::Ok();
      }
    }
  }

  // Keeps (time, examples so far) at most every sample_interval_ns_ (and
  // always the latest output), for the steady rate; the history is halved
  // and the interval doubled whenever it fills, so a long run costs no more.
  void RecordOutput(uint64_t now_ns, uint64_t examples) {
    last_output_ = {now_ns, examples};
    if (!history_.empty() && now_ns - history_.back().ns < sample_interval_ns_) return;
    history_.push_back(last_output_);
    if (history_.size() < kMaxHistory) return;
    for (size_t i = 0; i < history_.size() / 2; ++i) history_[i] = history_[2 * i];
    history_.resize(history_.size() / 2);
    sample_interval_ns_ *= 2;
  }

  // The rate from the end of the warm-up to the last output (RunSummary).
  void SteadyRate(uint64_t end_ns, RunSummary& s) const {
    s.steady_examples_per_second = s.examples_per_second;
    const double run = static_cast<double>(end_ns - start_ns_) * 1e-9;
    const double warm_up = std::max(0.1 * run, std::min(1.0, 0.25 * run));
    const uint64_t from_ns = start_ns_ + static_cast<uint64_t>(warm_up * 1e9);
    for (const OutputMark& mark : history_) {
      if (mark.ns < from_ns) continue;
      const double seconds = static_cast<double>(last_output_.ns - mark.ns) * 1e-9;
      // At least a tenth of the run after the mark, or the rate is noise.
      if (seconds <= 0.1 * run || last_output_.examples <= mark.examples) return;
      s.steady_examples_per_second = static_cast<double>(last_output_.examples - mark.examples) / seconds;
      s.steady_from_seconds = static_cast<double>(mark.ns - start_ns_) * 1e-9;
      return;
    }
  }

  // Stops the pipeline at the deadline or on an interrupt (Next() then
  // returns false) and calls on_progress every progress interval.
  void Monitor() {
    using Clock = std::chrono::steady_clock;  // CLOCK_MONOTONIC, as NowNs()
    uint64_t interval_ns = static_cast<uint64_t>(std::max(options_.progress_interval_s, 0.01) * 1e9);
    uint64_t next_progress = start_ns_ + interval_ns;
    uint64_t last_ns = start_ns_, last_outputs = 0;
    uint64_t deadline = deadline_ns_;  // 0 once passed
    std::unique_lock<std::mutex> lock(mu_);
    while (!done_) {
      uint64_t wake = options_.on_progress ? next_progress : ~uint64_t{0};
      if (deadline != 0) wake = std::min(wake, deadline);
      if (options_.interrupt != nullptr) wake = std::min(wake, tracer::NowNs() + kInterruptPollNs);
      if (wake == ~uint64_t{0}) {
        cv_.wait(lock);
      } else {
        cv_.wait_until(lock, Clock::time_point(std::chrono::nanoseconds(wake)));
      }
      if (done_) break;
      uint64_t now = tracer::NowNs();
      bool interrupt = options_.interrupt != nullptr && options_.interrupt->load() && !interrupted_.load();
      if (interrupt) interrupted_.store(true);
      if ((deadline != 0 && now >= deadline) || interrupt) {
        deadline = 0;
        lock.unlock();
        pipeline_.Stop();
        lock.lock();
      }
      if (options_.on_progress && now >= next_progress) {
        Progress progress = Snapshot(now);
        uint64_t outputs = progress.outputs;
        progress.throughput =
            static_cast<double>(outputs - last_outputs) / (static_cast<double>(now - last_ns) * 1e-9);
        last_ns = now;
        last_outputs = outputs;
        next_progress = now + interval_ns;
        lock.unlock();
        options_.on_progress(progress);
        lock.lock();
      }
    }
  }

  Progress Snapshot(uint64_t now) const {
    Progress p;
    p.seconds = static_cast<double>(now - start_ns_) * 1e-9;
    p.outputs = outputs_.load(std::memory_order_relaxed);
    p.source_elements = examples_.load(std::memory_order_relaxed);
    p.stall_fraction =
        p.seconds > 0 ? static_cast<double>(wait_ns_.load(std::memory_order_relaxed)) * 1e-9 / p.seconds : 0;
    p.buffer_bytes = pipeline_.BufferBytes();
    p.cache_bytes = pipeline_.CacheBytes();
    return p;
  }

  RunSummary Summarize(uint64_t end_ns) const {
    RunSummary s;
    s.seconds = static_cast<double>(end_ns - start_ns_) * 1e-9;
    s.outputs = outputs_.load(std::memory_order_relaxed);
    s.source_elements = examples_.load(std::memory_order_relaxed);
    if (s.seconds > 0) {
      s.throughput = static_cast<double>(s.outputs) / s.seconds;
      s.examples_per_second = static_cast<double>(s.source_elements) / s.seconds;
      s.stall_fraction = static_cast<double>(wait_ns_.load(std::memory_order_relaxed)) * 1e-9 / s.seconds;
      SteadyRate(end_ns, s);
    }
    s.peak_buffer_bytes = pipeline_.PeakBufferBytes();
    s.cache_bytes = pipeline_.CacheBytes();
    s.disk_cache_bytes = pipeline_.DiskCacheBytes();
    s.stopped_early = stopped_early_;
    s.interrupted = interrupted_.load();
    s.stages = pipeline_.StageSummaries();
    for (const StageSummary& stage : s.stages) s.failed_elements += stage.failed;
    s.errors = pipeline_.Errors();
    return s;
  }

  Pipeline& pipeline_;
  const RunOptions& options_;
  uint64_t step_ns_ = 0;
  uint64_t start_ns_ = 0;
  uint64_t deadline_ns_ = 0;  // 0: none
  bool stopped_early_ = false;
  std::atomic<bool> interrupted_{false};
  std::atomic<uint64_t> outputs_{0};
  std::atomic<uint64_t> examples_{0};
  std::atomic<uint64_t> wait_ns_{0};
  // The consumer thread's alone (RecordOutput), read after it finished.
  struct OutputMark {
    uint64_t ns = 0;
    uint64_t examples = 0;
  };
  static constexpr size_t kMaxHistory = 4096;
  std::vector<OutputMark> history_;
  OutputMark last_output_;
  uint64_t sample_interval_ns_ = 10'000'000;
  std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;
};

}  // namespace

StatusOr<RunSummary> RunPipeline(const models::PipelineConfig& config, const RunOptions& options) {
  BuildOptions build;
  build.registry = options.registry;
  build.deterministic = options.deterministic;
  build.base_dir = options.base_dir;
  build.resizable_workers = options.resizable_workers;
  PIPETUNE_ASSIGN_OR_RETURN(auto pipeline, Pipeline::Create(config, build));
  if (options.on_start) options.on_start(*pipeline);
  ConsumerLoop loop(*pipeline, config.consumer, options);
  return loop.Run();
}

Json SummaryToJson(const RunSummary& summary) {
  Json j;
  j["throughput"] = summary.throughput;
  j["examples_per_second"] = summary.examples_per_second;
  j["steady_examples_per_second"] = summary.steady_examples_per_second;
  j["steady_from_seconds"] = summary.steady_from_seconds;
  j["elements"] = summary.outputs;
  j["source_elements"] = summary.source_elements;
  j["seconds"] = summary.seconds;
  j["stall_fraction"] = summary.stall_fraction;
  j["failed_elements"] = summary.failed_elements;
  j["peak_buffer_bytes"] = summary.peak_buffer_bytes;
  j["cache_bytes"] = summary.cache_bytes;
  j["disk_cache_bytes"] = summary.disk_cache_bytes;
  j["stopped_early"] = summary.stopped_early;
  j["interrupted"] = summary.interrupted;
  j["errors"] = summary.errors;
  Json stages = Json::array();
  for (const StageSummary& s : summary.stages) {
    Json stage;
    stage["name"] = s.name;
    stage["op"] = s.op;
    stage["elements"] = s.elements;
    stage["consumed"] = s.consumed;
    stage["parallelism"] = s.parallelism;
    stage["failed"] = s.failed;
    stage["bytes"] = s.bytes;
    stage["busy_seconds"] = s.busy_seconds;
    stage["wait_input_seconds"] = s.wait_input_seconds;
    stage["wait_output_seconds"] = s.wait_output_seconds;
    stage["peak_buffer_bytes"] = s.peak_buffer_bytes;
    stage["cache_bytes"] = s.cache_bytes;
    stages.push_back(std::move(stage));
  }
  j["stages"] = std::move(stages);
  return j;
}

}  // namespace pipetune::runtime

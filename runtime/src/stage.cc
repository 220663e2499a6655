#include "stage.h"

#include <fmt/format.h>

#include <algorithm>
#include <exception>
#include <utility>

#include "pipetune/base/check.h"

namespace pipetune::runtime {
namespace {

// Output chunks: big enough to amortize a lock round trip and a wake-up over
// many cheap elements, small enough (in bytes and in time) that expensive
// elements go downstream one at a time without waiting for company.
constexpr size_t kMaxChunkItems = kChunkItems;
constexpr uint64_t kMaxChunkBytes = 256u << 10;
constexpr uint64_t kMaxChunkAgeNs = 20'000;
// Failure messages kept for the summary.
constexpr size_t kMaxMessages = 8;

}  // namespace

void RunState::StopAll() {
  stopping_.store(true, std::memory_order_relaxed);
  std::call_once(stop_once_, [this] {
    if (stop_handler_) stop_handler_();
  });
}

void RunState::RecordFailure(const models::StageConfig& stage, const Element& element, const Status& status) {
  std::string which = fmt::format("element {}", element.id);
  if (element.epoch > 0) which += fmt::format(" of epoch {}", element.epoch);
  if (!element.path.empty()) which += fmt::format(" ({})", element.path);
  std::string message = models::StageKeyError(stage, "", fmt::format("{}: {}", which, status.message()));
  bool stop = stage.on_error == models::OnError::kStop;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (messages_.size() < kMaxMessages) messages_.push_back(message);
    if (stop && error_.ok()) error_ = Failed(message);
  }
  if (stop) StopAll();
}

void RunState::Fail(const Status& status) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (messages_.size() < kMaxMessages) messages_.push_back(status.message());
    if (error_.ok()) error_ = status;
  }
  StopAll();
}

void RunState::Note(const std::string& message) {
  std::lock_guard<std::mutex> lock(mu_);
  if (messages_.size() < kMaxMessages) messages_.push_back(message);
}

Status RunState::error() const {
  std::lock_guard<std::mutex> lock(mu_);
  return error_;
}

std::vector<std::string> RunState::errors() const {
  std::lock_guard<std::mutex> lock(mu_);
  return messages_;
}

void RequestChannel::Post(uint32_t epoch) {
  std::lock_guard<std::mutex> lock(mu_);
  pending_.push_back(Request{epoch, posted_++});
  cv_.notify_one();
}

void RequestChannel::Cancel() {
  std::lock_guard<std::mutex> lock(mu_);
  cancelled_upto_.store(posted_, std::memory_order_relaxed);
}

bool RequestChannel::Wait(const RunState& run, Request* request) {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [&] { return shutdown_ || run.stopping() || !pending_.empty(); });
  if (shutdown_ || run.stopping()) return false;
  *request = pending_.front();
  pending_.pop_front();
  return true;
}

void RequestChannel::Shutdown() {
  std::lock_guard<std::mutex> lock(mu_);
  shutdown_ = true;
  cv_.notify_all();
}

Stage::Stage(const models::StageConfig& config, RunState* run)
    : config_(config),
      run_(run),
      trace_id_(tracer::RegisterStage(tracer::StageInfo{config.name, models::OpName(config.op),
                                                        static_cast<uint32_t>(config.parallelism)})) {}

void Stage::AllocateCounters() {
  counters_.clear();
  for (int i = 0; i < max_workers(); ++i) counters_.push_back(std::make_unique<WorkerCounters>());
}

std::vector<int> Stage::Resize(int) {
  std::vector<int> start;
  if (threads_started_) return start;
  threads_started_ = true;
  for (int i = 0; i < workers(); ++i) start.push_back(i);
  return start;
}

void Stage::AccountState(int64_t delta) {
  uint64_t now = state_bytes_.fetch_add(static_cast<uint64_t>(delta), std::memory_order_relaxed) +
                 static_cast<uint64_t>(delta);
  if (delta > 0 && now > peak_state_bytes_.load(std::memory_order_relaxed)) {
    peak_state_bytes_.store(now, std::memory_order_relaxed);
  }
  run_->buffers().Add(delta);
}

StageSummary Stage::Summary() const {
  StageSummary s;
  s.name = config_.name;
  s.op = models::OpName(config_.op);
  s.parallelism = workers();
  tracer::StageCounts total;
  for (const auto& c : counters_) {
    total += c->counts.Load();
    s.failed += c->failed.load(std::memory_order_relaxed);
  }
  s.elements = total.produced;
  s.consumed = total.consumed;
  s.bytes = total.bytes_produced;
  s.busy_seconds = static_cast<double>(total.work_ns) * 1e-9;
  s.wait_input_seconds = static_cast<double>(total.wait_input_ns) * 1e-9;
  s.wait_output_seconds = static_cast<double>(total.wait_output_ns) * 1e-9;
  s.peak_buffer_bytes =
      (output_ ? output_->peak_bytes() : 0) + peak_state_bytes_.load(std::memory_order_relaxed);
  s.cache_bytes = CacheBytes();
  return s;
}

namespace {

// Runs an element function; an exception it throws fails the element
// instead of the process.
template <typename Call>
auto CallGuarded(Call&& call) -> decltype(call()) {
  try {
    return call();
  } catch (const std::exception& e) {
    return Failed(fmt::format("the function threw: {}", e.what()));
  } catch (...) {
    return Failed("the function threw");
  }
}

}  // namespace

Status ApplyGuarded(const MapFunction& fn, Element& element, const FnContext& context) {
  return CallGuarded([&] { return fn.Apply(element, context); });
}

StatusOr<bool> KeepGuarded(const FilterFunction& fn, const Element& element, const FnContext& context) {
  return CallGuarded([&] { return fn.Keep(element, context); });
}

StageWorker::StageWorker(Stage& stage, int index)
    : stage_(stage),
      counters_(stage.counters(index)),
      trace_(tracer::AttachWorker(stage.trace_id(), &counters_.counts)),
      parallel_(stage.max_workers() > 1) {
  in_.reserve(kMaxChunkItems);
  out_.reserve(kMaxChunkItems);
  now_ns = tracer::NowNs();
}

StageWorker::~StageWorker() { tracer::DetachWorker(trace_); }

void StageWorker::set_max_chunk(size_t items) { max_chunk_ = std::clamp<size_t>(items, 1, kMaxChunkItems); }

size_t StageWorker::PopSize() const {
  if (!parallel_) return max_chunk_;
  // Workers of a parallel stage take only about a chunk's worth of time each
  // (one element until they know what one costs), so that one worker does
  // not sit on elements its siblings could run.
  if (last_cost_ns_ == 0) return 1;
  return std::clamp<size_t>(kMaxChunkAgeNs / last_cost_ns_, 1, max_chunk_);
}

StageWorker::Input StageWorker::Next(Item* item) {
  if (in_pos_ == in_.size()) {
    in_.clear();
    in_pos_ = 0;
    Queue* input = stage_.input();
    PIPETUNE_CHECK(input != nullptr);
    uint64_t waited = 0;
    Queue::PopResult popped = input->Pop(in_, PopSize(), /*block=*/false, now_ns, &waited);
    if (popped.status == Queue::PopStatus::kEmpty) {
      // Nothing ready: hand on what we have before we sleep.
      if (!Flush()) return Input::kClosed;
      popped = input->Pop(in_, PopSize(), /*block=*/true, now_ns, &waited, /*timeout_ms=*/-1, wake_at_);
    }
    if (waited > 0) {
      trace_->WaitInput(waited);
    }
    if (popped.status == Queue::PopStatus::kClosed) return Input::kClosed;
    in_first_seq_ = popped.first_seq;
    if (popped.status == Queue::PopStatus::kItems) {
      trace_->Consumed(in_.size());
    }
  }
  seq_ = in_first_seq_ + in_pos_;
  *item = std::move(in_[in_pos_++]);
  if (item->end_of_pass) return Input::kEndOfPass;
  if (report_done_) ++pending_done_;
  return Input::kElement;
}

void StageWorker::WorkDone(uint64_t begin_ns, uint64_t element_id) {
  uint64_t end = tracer::NowNs();
  uint64_t cost = end > begin_ns ? end - begin_ns : 0;
  trace_->Work(begin_ns, end, element_id);
  last_cost_ns_ = cost;
  now_ns = end;
}

bool StageWorker::ShouldFlush() const {
  if (out_.size() >= max_chunk_ || out_bytes_ >= kMaxChunkBytes) return true;
  // Would waiting for one more element make the chunk too old?
  return (now_ns - out_first_ns_) + last_cost_ns_ >= kMaxChunkAgeNs;
}

bool StageWorker::Emit(Element&& element) {
  if (out_.empty()) out_first_ns_ = now_ns;
  Item& item = out_.emplace_back();
  item.bytes = element.ByteSize();
  item.element = std::move(element);
  out_bytes_ += item.bytes;
  if (ShouldFlush()) return Flush();
  return true;
}

bool StageWorker::EmitEndOfPass() {
  out_.push_back(Item::EndOfPass());
  return Flush();
}

bool StageWorker::PushChunk(std::vector<Item>& chunk) {
  uint64_t elements = 0, bytes = 0;
  for (const Item& item : chunk) {
    if (item.end_of_pass) continue;
    ++elements;
    bytes += item.bytes;
  }
  uint64_t blocked = 0;
  bool ok = stage_.output()->Push(chunk, now_ns, &blocked);
  if (blocked > 0) {
    trace_->WaitOutput(blocked);
  }
  if (!ok) return false;
  trace_->Produced(elements, bytes);
  return true;
}

bool StageWorker::Flush() {
  if (!out_.empty()) {
    bool ok = PushChunk(out_);
    out_bytes_ = 0;
    if (!ok) return false;
  }
  if (pending_done_ > 0) {
    stage_.input()->Done(pending_done_);
    pending_done_ = 0;
  }
  return !stage_.run().stopping();
}

void PassServingStage::RunWorker(int index) {
  StageWorker worker(*this, index);
  RequestChannel::Request request;
  while (channel_.Wait(*run_, &request)) {
    worker.now_ns = tracer::NowNs();
    if (!ServePass(worker, request)) return;
    if (!worker.EmitEndOfPass()) return;
  }
}

}  // namespace pipetune::runtime

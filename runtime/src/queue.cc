#include "queue.h"

#include <algorithm>
#include <chrono>
#include <utility>

namespace pipetune::runtime {

Queue::Queue(Limits limits, int consumers, MemoryAccount* account, tracer::StageId owner)
    : limits_(limits),
      consumers_(std::max(consumers, 1)),
      multi_consumer_(consumers_ > 1),
      account_(account),
      owner_(owner) {
  size_t capacity = 16;
  while (capacity < std::min<size_t>(limits_.max_elements, 256)) capacity *= 2;
  ring_.resize(capacity);
}

Queue::~Queue() {
  // Whatever is left when the pipeline is torn down leaves the account too.
  if (account_ != nullptr && bytes_ > 0) account_->Add(-static_cast<int64_t>(bytes_));
  tracer::SetBufferOccupancy(owner_, 0, 0);
}

void Queue::Grow() {
  std::vector<Item> bigger(ring_.size() * 2);
  for (size_t i = 0; i < count_; ++i) bigger[i] = std::move(ring_[(head_ + i) & (ring_.size() - 1)]);
  ring_ = std::move(bigger);
  head_ = 0;
}

void Queue::Publish(int64_t elements, uint64_t bytes, int64_t bytes_delta) {
  if (account_ != nullptr && bytes_delta != 0) account_->Add(bytes_delta);
  tracer::SetBufferOccupancy(owner_, elements, static_cast<int64_t>(bytes));
}

bool Queue::Push(std::vector<Item>& chunk, uint64_t& now_ns, uint64_t* blocked_ns) {
  size_t next = 0;
  bool waited = false;
  int64_t added = 0;
  std::unique_lock<std::mutex> lock(mu_);
  while (next < chunk.size()) {
    if (closed()) break;
    if (FullLocked()) {
      ++push_waiters_;
      not_full_.wait(lock, [this] { return closed() || !FullLocked(); });
      --push_waiters_;
      waited = true;
      continue;
    }
    size_t moved = 0;
    while (next < chunk.size() && !FullLocked()) {
      if (count_ == ring_.size()) Grow();
      Item& item = chunk[next++];
      if (item.end_of_pass) ++markers_;
      bytes_ += item.bytes;
      added += static_cast<int64_t>(item.bytes);
      ring_[(head_ + count_) & (ring_.size() - 1)] = std::move(item);
      ++count_;
      ++moved;
    }
    if (bytes_ > peak_bytes_.load(std::memory_order_relaxed)) {
      peak_bytes_.store(bytes_, std::memory_order_relaxed);
    }
    if (pop_waiters_ > 0 && (multi_consumer_ || ReadyLocked(pop_wake_at_))) {
      if (moved > 1 && pop_waiters_ > 1) {
        not_empty_.notify_all();
      } else {
        not_empty_.notify_one();
      }
    }
  }
  bool ok = next == chunk.size();
  int64_t count = static_cast<int64_t>(count_);
  uint64_t bytes = bytes_;
  lock.unlock();
  chunk.clear();
  if (waited) {
    uint64_t t = tracer::NowNs();
    *blocked_ns += t > now_ns ? t - now_ns : 0;
    now_ns = t;
  }
  Publish(count, bytes, added);
  return ok;
}

Queue::PopResult Queue::Pop(std::vector<Item>& out, size_t max_items, bool block, uint64_t& now_ns,
                            uint64_t* blocked_ns, int64_t timeout_ms, size_t wake_at) {
  PopResult result{PopStatus::kItems, 0};
  bool waited = false;
  int64_t removed = 0;
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::milliseconds(std::max<int64_t>(timeout_ms, 0));
  // A timed pop returns what there is when its time is up: no wake_at.
  const size_t wanted = block && timeout_ms < 0 && !multi_consumer_ ? std::max<size_t>(wake_at, 1) : 1;
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    if (closed()) {
      result.status = PopStatus::kClosed;
      break;
    }
    if (count_ > 0 && !paused_ && ReadyLocked(wanted)) break;
    if (!block || (timeout_ms >= 0 && std::chrono::steady_clock::now() >= deadline)) {
      result.status = PopStatus::kEmpty;
      break;
    }
    pop_wake_at_ = wanted;
    ++pop_waiters_;
    if (timeout_ms >= 0) {
      not_empty_.wait_until(lock, deadline);
    } else {
      not_empty_.wait(lock);
    }
    --pop_waiters_;
    waited = true;
  }
  size_t popped = 0;
  if (result.status == PopStatus::kItems) {
    const size_t mask = ring_.size() - 1;
    result.first_seq = next_seq_;
    if (ring_[head_].end_of_pass) {
      result.status = PopStatus::kEndOfPass;
      out.push_back(std::move(ring_[head_]));
      head_ = (head_ + 1) & mask;
      --count_;
      --markers_;
      ++next_seq_;
      popped = 1;
      if (multi_consumer_) paused_ = true;
    } else {
      size_t fair_share = (count_ + consumers_ - 1) / consumers_;
      max_items = std::max<size_t>(std::min(max_items, fair_share), 1);
      while (popped < max_items && count_ > 0 && !ring_[head_].end_of_pass) {
        Item& item = ring_[head_];
        bytes_ -= item.bytes;
        removed += static_cast<int64_t>(item.bytes);
        out.push_back(std::move(item));
        head_ = (head_ + 1) & mask;
        --count_;
        ++popped;
      }
      next_seq_ += popped;
      if (multi_consumer_) outstanding_ += popped;
    }
    if (push_waiters_ > 0 && RoomToRefillLocked()) {
      if (push_waiters_ > 1) {
        not_full_.notify_all();
      } else {
        not_full_.notify_one();
      }
    }
  }
  int64_t count = static_cast<int64_t>(count_);
  uint64_t bytes = bytes_;
  lock.unlock();
  if (waited) {
    uint64_t t = tracer::NowNs();
    *blocked_ns += t > now_ns ? t - now_ns : 0;
    now_ns = t;
  }
  if (popped > 0) Publish(count, bytes, -removed);
  return result;
}

void Queue::Done(size_t n) {
  if (!multi_consumer_ || n == 0) return;
  std::lock_guard<std::mutex> lock(mu_);
  outstanding_ -= std::min(outstanding_, n);
  if (outstanding_ == 0 && drain_waiter_) drained_.notify_all();
}

void Queue::WaitOutstanding() {
  if (!multi_consumer_) return;
  std::unique_lock<std::mutex> lock(mu_);
  drain_waiter_ = true;
  drained_.wait(lock, [this] { return outstanding_ == 0 || closed(); });
  drain_waiter_ = false;
}

void Queue::Resume() {
  if (!multi_consumer_) return;
  std::lock_guard<std::mutex> lock(mu_);
  paused_ = false;
  if (pop_waiters_ > 0) not_empty_.notify_all();
}

void Queue::SetConsumers(int consumers) {
  std::lock_guard<std::mutex> lock(mu_);
  consumers_ = std::max(consumers, 1);
}

void Queue::SetMaxElements(size_t max_elements) {
  std::lock_guard<std::mutex> lock(mu_);
  limits_.max_elements = std::max<size_t>(max_elements, 1);
  if (push_waiters_ > 0 && !FullLocked()) not_full_.notify_all();
}

void Queue::Close() {
  std::lock_guard<std::mutex> lock(mu_);
  closed_.store(true, std::memory_order_relaxed);
  not_empty_.notify_all();
  not_full_.notify_all();
  drained_.notify_all();
}

}  // namespace pipetune::runtime

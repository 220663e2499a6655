// The bounded buffer between two stages, and the memory account every buffer
// reports to.
//
// Items move in chunks (a vector at a time) so that one lock round trip and
// at most one wake-up pay for many small elements; that is what lets a chain
// of do-nothing stages move millions of elements per second. Blocking is on
// condition variables only, and a waiter is notified only when someone waits.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <vector>

#include "pipetune/runtime/element.h"
#include "pipetune/tracer/tracer.h"

namespace pipetune::runtime {

// What flows through a queue: an element, or the marker that ends one pass
// (one answer to a RequestPass, see stage.h).
struct Item {
  Element element;
  bool end_of_pass = false;
  uint64_t bytes = 0;  // element.ByteSize(), set by whoever pushes it

  static Item EndOfPass() {
    Item item;
    item.end_of_pass = true;
    return item;
  }
};

// Bytes held, with a high-water mark. Lock-free; updated once per chunk.
class MemoryAccount {
 public:
  void Add(int64_t delta) {
    int64_t now = current_.fetch_add(delta, std::memory_order_relaxed) + delta;
    if (delta <= 0) return;
    int64_t peak = peak_.load(std::memory_order_relaxed);
    while (now > peak && !peak_.compare_exchange_weak(peak, now, std::memory_order_relaxed)) {
    }
  }
  uint64_t current() const {
    int64_t v = current_.load(std::memory_order_relaxed);
    return v > 0 ? static_cast<uint64_t>(v) : 0;
  }
  uint64_t peak() const { return static_cast<uint64_t>(peak_.load(std::memory_order_relaxed)); }

 private:
  std::atomic<int64_t> current_{0};
  std::atomic<int64_t> peak_{0};
};

// Items a worker moves at once (at most): one lock round trip per chunk.
inline constexpr size_t kChunkItems = 256;

class Queue {
 public:
  struct Limits {
    size_t max_elements = 4 * kChunkItems;  // items (markers included)
    uint64_t max_bytes = 4u << 20;          // full at this many bytes...
    // ...but only once it holds this many items, so one large element always fits.
    size_t min_elements = 1;
    // A producer blocked on a full queue is woken only once it has drained
    // to half (low water), so that it then pushes many chunks per wake-up
    // instead of one. Off for prefetch buffers, which refill at once.
    bool refill_at_half = true;
  };
  enum class PopStatus { kItems, kEndOfPass, kEmpty, kClosed };
  struct PopResult {
    PopStatus status;
    uint64_t first_seq = 0;  // sequence number of the first item popped
  };

  // `consumers`: how many workers pop. With more than one, a pop takes at
  // most a fair share of what is there, and popping a marker pauses the
  // queue until Resume(), so that the worker that took it can wait for the
  // others to finish the elements before it (WaitOutstanding) and forward
  // the marker in order. `owner` gets the occupancy gauge in the trace.
  Queue(Limits limits, int consumers, MemoryAccount* account, tracer::StageId owner);
  ~Queue();
  Queue(const Queue&) = delete;
  Queue& operator=(const Queue&) = delete;

  // Moves every item of `chunk` in (their `bytes` set), blocking while the queue is full, and
  // clears `chunk`. `now_ns` is the caller's last clock reading; when the push
  // blocks it becomes the time it woke, and *blocked_ns grows by the wait.
  // False: the queue was closed (items dropped).
  bool Push(std::vector<Item>& chunk, uint64_t& now_ns, uint64_t* blocked_ns);

  // Appends up to `max_items` elements to `out`, or a marker alone. With
  // `block`, waits while empty (or paused); the wait is timed like Push's.
  // Popped elements count as outstanding until Done(). With `timeout_ms` >= 0
  // a blocking pop gives up after that long and returns kEmpty.
  //
  // `wake_at` (single-consumer queues, blocking pops without a timeout): the
  // pop sleeps until that many items are ready, or a marker is, or the queue
  // is half full, or it closes; producers wake it only then. For a consumer
  // that can do nothing with fewer (a batch waiting for its last members):
  // one wake-up per several elements instead of one per element. Half full
  // always wakes it, so a producer never blocks on a consumer that sleeps.
  PopResult Pop(std::vector<Item>& out, size_t max_items, bool block, uint64_t& now_ns, uint64_t* blocked_ns,
                int64_t timeout_ms = -1, size_t wake_at = 1);

  // `n` popped elements have been passed on or dropped.
  void Done(size_t n);
  // Blocks until every popped element is Done() (or the queue is closed).
  void WaitOutstanding();
  // Ends the pause a popped marker started (multi-consumer queues).
  void Resume();

  // Wakes every waiter; later pushes drop their items, pops return kClosed.
  void Close();
  bool closed() const { return closed_.load(std::memory_order_relaxed); }

  // Live tuning. The workers that pop now (a resized parallel stage): a
  // pop's fair share follows it. Only a queue built with more than one
  // consumer pauses on markers, so a stage that may grow is built with its
  // most workers and told how many run.
  void SetConsumers(int consumers);
  // A prefetch buffer's depth now (>= 1). A smaller one drains to it (no
  // element is dropped); a larger one wakes a producer blocked on the old.
  void SetMaxElements(size_t max_elements);

  uint64_t peak_bytes() const { return peak_bytes_.load(std::memory_order_relaxed); }

 private:
  bool FullLocked() const {
    return count_ >= limits_.max_elements || (bytes_ >= limits_.max_bytes && count_ >= limits_.min_elements);
  }
  // Whether a consumer sleeping for `wake_at` items has reason to wake.
  bool ReadyLocked(size_t wake_at) const {
    return count_ >= wake_at || markers_ > 0 || count_ >= limits_.max_elements / 2 ||
           (bytes_ >= limits_.max_bytes / 2 && count_ >= limits_.min_elements);
  }
  bool RoomToRefillLocked() const {
    if (!limits_.refill_at_half) return !FullLocked();
    return count_ <= limits_.max_elements / 2 &&
           (bytes_ <= limits_.max_bytes / 2 || count_ < limits_.min_elements);
  }
  void Grow();
  void Publish(int64_t elements, uint64_t bytes, int64_t bytes_delta);

  Limits limits_;  // max_elements changes under mu_ (SetMaxElements)
  int consumers_;  // under mu_ (SetConsumers)
  const bool multi_consumer_;
  MemoryAccount* const account_;
  const tracer::StageId owner_;

  std::mutex mu_;
  std::condition_variable not_empty_;
  std::condition_variable not_full_;
  std::condition_variable drained_;  // outstanding_ reached 0
  // A ring of items; capacity a power of two, grows only if a chunk overshoots.
  std::vector<Item> ring_;
  size_t head_ = 0;
  size_t count_ = 0;
  uint64_t bytes_ = 0;
  uint64_t next_seq_ = 0;
  size_t outstanding_ = 0;
  size_t markers_ = 0;      // end-of-pass markers in the ring
  size_t pop_wake_at_ = 1;  // what the sleeping consumer waits for (single consumer)
  bool paused_ = false;
  int pop_waiters_ = 0;
  int push_waiters_ = 0;
  bool drain_waiter_ = false;
  std::atomic<bool> closed_{false};
  std::atomic<uint64_t> peak_bytes_{0};
};

}  // namespace pipetune::runtime

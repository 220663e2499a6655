#include "image_buffers.h"

#include <mutex>
#include <utility>
#include <vector>

namespace pipetune::runtime::image {
namespace {

class BufferPool {
 public:
  Bytes* Take(size_t size) {
    std::lock_guard<std::mutex> lock(mutex_);
    // Newest first: the most recently released buffer is the likeliest to
    // still be in cache. A buffer more than twice too large stays for a
    // bigger request instead of being wasted on a small one. Among the first
    // few that fit, one whose size already covers the request is preferred:
    // the caller's resize then shrinks it for free, where growing would
    // zero-fill the tail (sizes vary: file contents, crop windows).
    constexpr int kLookAhead = 4;
    size_t chosen = idle_.size();
    int seen = 0;
    for (size_t i = idle_.size(); i-- > 0 && seen < kLookAhead;) {
      const size_t capacity = idle_[i]->capacity();
      if (capacity >= size && capacity / 2 <= size) {
        if (chosen == idle_.size()) chosen = i;
        ++seen;
        if (idle_[i]->size() >= size) {
          chosen = i;
          break;
        }
      }
    }
    if (chosen == idle_.size()) return nullptr;
    Bytes* buffer = idle_[chosen];
    idle_[chosen] = idle_.back();
    idle_.pop_back();
    idle_bytes_ -= buffer->capacity();
    return buffer;
  }

  void Give(Bytes* buffer) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (idle_bytes_ + buffer->capacity() <= kMaxPooledBytes) {
        idle_bytes_ += buffer->capacity();
        idle_.push_back(buffer);
        return;
      }
    }
    delete buffer;
  }

  size_t IdleBytes() {
    std::lock_guard<std::mutex> lock(mutex_);
    return idle_bytes_;
  }

 private:
  std::mutex mutex_;
  std::vector<Bytes*> idle_;
  size_t idle_bytes_ = 0;
};

// Never destroyed: Elements holding pooled buffers may outlive every other
// static (a test's globals, a cache torn down at exit), and their deleter
// must always find the pool.
BufferPool& Pool() {
  static BufferPool* pool = new BufferPool;
  return *pool;
}

}  // namespace

std::shared_ptr<Bytes> AcquireBuffer(size_t size) {
  Bytes* buffer = Pool().Take(size);
  if (buffer == nullptr) buffer = new Bytes;
  // Same size as last time (the usual case: fixed-size crops and tensors) or
  // smaller: no work. Growing zero-fills only the new tail.
  buffer->resize(size);
  return std::shared_ptr<Bytes>(buffer, [](Bytes* released) { Pool().Give(released); });
}

size_t PooledBytes() { return Pool().IdleBytes(); }

}  // namespace pipetune::runtime::image

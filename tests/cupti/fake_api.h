// An in-process CuptiApi for the recorder tests: it hands the recorder
// buffers of activity records laid out as cupti.h's structs, the way
// libcupti does (buffer request, fill, completion on flush), and can play
// the failures a real process meets: another subscriber, an old CUPTI,
// dropped records, no timestamp callback.
#pragma once

#include <cstring>
#include <vector>

#include "pipetune/cupti/cupti_api.h"

namespace pipetune::cupti::testing {

struct FakeBehaviour {
  uint32_t version = CUPTI_API_VERSION;
  CUptiResult subscribe = CUPTI_SUCCESS;
  CUptiResult enable = CUPTI_SUCCESS;
  bool timestamp_callback = true;
  int64_t clock_minus_host_ns = 0;  // CUPTI's own clock, relative to the host's (no callback)
  size_t dropped_per_buffer = 0;
};

class FakeCuptiApi : public CuptiApi {
 public:
  explicit FakeCuptiApi(FakeBehaviour b) : b_(b) {}

  // Queues a record (any cupti.h activity struct) for the next flush.
  template <class Record>
  void Queue(const Record& r) {
    std::vector<uint8_t> bytes(sizeof(Record));
    std::memcpy(bytes.data(), &r, sizeof(Record));
    queued_.push_back(std::move(bytes));
  }
  // The time CUPTI would stamp now: the registered callback's, or its own clock.
  uint64_t Now() {
    if (timestamp_ != nullptr) return timestamp_();
    uint64_t t = 0;
    GetTimestamp(&t);
    return t;
  }
  // Asks for a buffer without completing it (fills the capped pool).
  uint8_t* RequestBuffer(size_t* size) {
    uint8_t* buffer = nullptr;
    size_t max_records = 0;
    requested_(&buffer, size, &max_records);
    return buffer;
  }
  int flushes = 0;
  int subscribed = 0;
  std::vector<CUpti_ActivityKind> enabled;

  CUptiResult GetVersion(uint32_t* v) override {
    *v = b_.version;
    return CUPTI_SUCCESS;
  }
  CUptiResult Subscribe(CUpti_SubscriberHandle*, CUpti_CallbackFunc, void*) override {
    if (b_.subscribe == CUPTI_SUCCESS) ++subscribed;
    return b_.subscribe;
  }
  CUptiResult Unsubscribe(CUpti_SubscriberHandle) override {
    --subscribed;
    return CUPTI_SUCCESS;
  }
  CUptiResult ActivityEnable(CUpti_ActivityKind k) override {
    if (b_.enable != CUPTI_SUCCESS) return b_.enable;
    enabled.push_back(k);
    return CUPTI_SUCCESS;
  }
  CUptiResult ActivityDisable(CUpti_ActivityKind k) override {
    std::erase(enabled, k);
    return CUPTI_SUCCESS;
  }
  CUptiResult ActivityRegisterCallbacks(CUpti_BuffersCallbackRequestFunc a,
                                        CUpti_BuffersCallbackCompleteFunc b) override {
    requested_ = a;
    completed_ = b;
    return CUPTI_SUCCESS;
  }
  // Fills one buffer with everything queued (8-byte aligned, as CUPTI does)
  // and completes it.
  CUptiResult ActivityFlushAll(uint32_t) override {
    ++flushes;
    if (queued_.empty() || requested_ == nullptr) return CUPTI_SUCCESS;
    uint8_t* buffer = nullptr;
    size_t size = 0, max_records = 0;
    requested_(&buffer, &size, &max_records);
    if (buffer == nullptr) {  // no buffer: the records are lost, and counted
      pending_drops_ += queued_.size();
      queued_.clear();
      return CUPTI_SUCCESS;
    }
    size_t used = 0;
    offsets_.clear();
    for (const auto& r : queued_) {
      if (used + r.size() > size) break;
      std::memcpy(buffer + used, r.data(), r.size());
      offsets_.push_back(used);
      used += (r.size() + 7) & ~size_t{7};
    }
    queued_.clear();
    pending_drops_ += b_.dropped_per_buffer;
    completed_(nullptr, 0, buffer, size, used);
    return CUPTI_SUCCESS;
  }
  CUptiResult ActivityGetNextRecord(uint8_t* buffer, size_t, CUpti_Activity** record) override {
    size_t next = 0;
    if (*record != nullptr) {
      size_t at = reinterpret_cast<uint8_t*>(*record) - buffer;
      while (next < offsets_.size() && offsets_[next] <= at) ++next;
    }
    if (next >= offsets_.size()) return CUPTI_ERROR_MAX_LIMIT_REACHED;
    *record = reinterpret_cast<CUpti_Activity*>(buffer + offsets_[next]);
    return CUPTI_SUCCESS;
  }
  CUptiResult ActivityGetNumDroppedRecords(CUcontext, uint32_t, size_t* dropped) override {
    *dropped = pending_drops_;
    pending_drops_ = 0;
    return CUPTI_SUCCESS;
  }
  bool HasTimestampCallback() const override { return b_.timestamp_callback; }
  CUptiResult ActivityRegisterTimestampCallback(CUpti_TimestampCallbackFunc f) override {
    timestamp_ = f;
    return CUPTI_SUCCESS;
  }
  CUptiResult GetTimestamp(uint64_t* t) override {
    timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    int64_t host = static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
    *t = static_cast<uint64_t>(host + b_.clock_minus_host_ns);
    return CUPTI_SUCCESS;
  }
  std::string ResultString(CUptiResult r) override { return "fake CUPTI error " + std::to_string(r); }

 private:
  FakeBehaviour b_;
  CUpti_BuffersCallbackRequestFunc requested_ = nullptr;
  CUpti_BuffersCallbackCompleteFunc completed_ = nullptr;
  CUpti_TimestampCallbackFunc timestamp_ = nullptr;
  std::vector<std::vector<uint8_t>> queued_;
  std::vector<size_t> offsets_;
  size_t pending_drops_ = 0;
};

}  // namespace pipetune::cupti::testing

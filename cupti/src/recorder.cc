// The activity recorder: CUPTI buffer callbacks, the capped buffer pool,
// clock alignment, and the process-wide instance. See gpu_tracing.h.
#include <atomic>
#include <cstdlib>
#include <iterator>
#include <mutex>
#include <string>
#include <vector>

#include "convert.h"
#include "pipetune/cupti/gpu_tracing.h"
#include "pipetune/tracer/tracer.h"

namespace pipetune::cupti {
namespace {

using tracer::GpuClockSource;
using tracer::GpuState;
using tracer::GpuStatus;

constexpr CUpti_ActivityKind kKinds[] = {
    CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL,
    CUPTI_ACTIVITY_KIND_MEMCPY,
    CUPTI_ACTIVITY_KIND_MEMSET,
    CUPTI_ACTIVITY_KIND_SYNCHRONIZATION,
};

constexpr const char* kConflictMessage =
    "another CUPTI subscriber holds this process (Nsight Systems, Nsight Compute, or a framework's own "
    "profiler such as torch.profiler): GPU activity is not recorded; the pipeline still is";

uint64_t HostClock() { return tracer::NowNs(); }

void CUPTIAPI IgnoreCallback(void*, CUpti_CallbackDomain, CUpti_CallbackId, const void*) {}

}  // namespace

struct GpuActivityRecorder::State {
  std::unique_ptr<CuptiApi> api;
  RecorderOptions options;

  std::mutex mu;  // guards everything below
  std::vector<uint8_t*> free_buffers;
  size_t buffers_total = 0;
  RecorderStats stats;
  GpuStatus status;
  bool recording = false;
  bool subscribed = false;
  CUpti_SubscriberHandle subscriber{};
  int64_t offset_ns = 0;
  internal::ContextDevices devices;

  ~State() {
    for (uint8_t* b : free_buffers) std::free(b);
  }
  GpuStatus Finish(GpuState state, std::string message) {
    std::lock_guard<std::mutex> lock(mu);
    status.state = state;
    status.message = std::move(message);
    status.time_ns = tracer::NowNs();
    tracer::RecordGpuStatus(status);
    return status;
  }
  std::string Why(const char* call, CUptiResult r) {
    return std::string(call) + " failed: " + api->ResultString(r);
  }
};

namespace {

// CUPTI's buffer callbacks carry no user data: the one recording instance.
// g_flush_mu orders the snapshot hook's flush against Stop.
std::mutex g_flush_mu;
GpuActivityRecorder::State* g_active = nullptr;  // guarded by g_flush_mu for writes
std::atomic<GpuActivityRecorder::State*> g_callbacks{nullptr};

// CUPTI's count of records it dropped for (context, stream) since the last
// call, into the trace.
void CountDrops(GpuActivityRecorder::State& s, CUcontext context, uint32_t stream) {
  size_t dropped = 0;
  if (s.api->ActivityGetNumDroppedRecords(context, stream, &dropped) == CUPTI_SUCCESS && dropped > 0) {
    tracer::RecordGpuDrops(dropped);
    std::lock_guard<std::mutex> lock(s.mu);
    s.stats.dropped_at_source += dropped;
  }
}

void CUPTIAPI BufferRequested(uint8_t** buffer, size_t* size, size_t* max_records) {
  *buffer = nullptr;
  *size = 0;
  *max_records = 0;  // as many as fit
  GpuActivityRecorder::State* s = g_callbacks.load(std::memory_order_acquire);
  if (s == nullptr) return;
  std::lock_guard<std::mutex> lock(s->mu);
  if (!s->free_buffers.empty()) {
    *buffer = s->free_buffers.back();
    s->free_buffers.pop_back();
  } else if (s->buffers_total < s->options.max_buffers) {
    *buffer = static_cast<uint8_t*>(std::aligned_alloc(8, s->options.buffer_bytes));
    if (*buffer != nullptr) {
      ++s->buffers_total;
      ++s->stats.buffers_allocated;
    }
  }
  if (*buffer == nullptr) {
    ++s->stats.buffers_refused;  // CUPTI drops records and counts them
    return;
  }
  *size = s->options.buffer_bytes;
}

void CUPTIAPI BufferCompleted(CUcontext context, uint32_t stream, uint8_t* buffer, size_t, size_t valid) {
  GpuActivityRecorder::State* s = g_callbacks.load(std::memory_order_acquire);
  if (s == nullptr) {
    std::free(buffer);  // a late buffer after Stop: nobody wants it
    return;
  }
  std::vector<tracer::GpuActivity> batch;
  uint64_t skipped = 0;
  {
    std::lock_guard<std::mutex> lock(s->mu);
    CUpti_Activity* record = nullptr;
    while (valid > 0 && s->api->ActivityGetNextRecord(buffer, valid, &record) == CUPTI_SUCCESS) {
      std::optional<tracer::GpuActivity> a = internal::ConvertRecord(*record, s->offset_ns, s->devices);
      if (a) {
        batch.push_back(std::move(*a));
      } else {
        ++skipped;
      }
    }
    s->stats.records += batch.size();
    s->stats.records_skipped += skipped;
    if (buffer != nullptr) s->free_buffers.push_back(buffer);
  }
  for (const tracer::GpuActivity& a : batch) tracer::RecordGpuActivity(a);
  CountDrops(*s, context, stream);
}

// After a flush: drops not tied to a completed buffer (a context with no
// buffer to report on, or device-independent records: context NULL).
void FlushAndCountDrops(GpuActivityRecorder::State& s) {
  s.api->ActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
  CountDrops(s, nullptr, 0);
  std::lock_guard<std::mutex> lock(s.mu);
  ++s.stats.flushes;
}

void SnapshotHook() {
  std::lock_guard<std::mutex> lock(g_flush_mu);
  if (g_active != nullptr) FlushAndCountDrops(*g_active);
}

// gpu + offset = host: the host readings that bracket CUPTI's most tightly.
int64_t MeasureOffset(CuptiApi& api) {
  int64_t best_offset = 0;
  uint64_t best_width = ~uint64_t{0};
  for (int i = 0; i < 5; ++i) {
    uint64_t before = tracer::NowNs();
    uint64_t gpu = 0;
    if (api.GetTimestamp(&gpu) != CUPTI_SUCCESS) return 0;
    uint64_t after = tracer::NowNs();
    if (after - before < best_width) {
      best_width = after - before;
      best_offset = static_cast<int64_t>(before + (after - before) / 2) - static_cast<int64_t>(gpu);
    }
  }
  return best_offset;
}

}  // namespace

GpuActivityRecorder::GpuActivityRecorder(std::unique_ptr<CuptiApi> api, const RecorderOptions& options)
    : state_(std::make_unique<State>()) {
  state_->api = std::move(api);
  state_->options = options;
  if (state_->options.max_buffers == 0) state_->options.max_buffers = 1;
  for (size_t i = 0; i < options.buffers_preallocated && i < state_->options.max_buffers; ++i) {
    if (auto* b = static_cast<uint8_t*>(std::aligned_alloc(8, options.buffer_bytes))) {
      state_->free_buffers.push_back(b);
      ++state_->buffers_total;
      ++state_->stats.buffers_allocated;
    }
  }
}

GpuActivityRecorder::~GpuActivityRecorder() {
  if (recording()) Stop();
}

GpuStatus GpuActivityRecorder::Start() {
  State& s = *state_;
  CuptiApi& api = *s.api;
  {
    std::lock_guard<std::mutex> lock(g_flush_mu);
    if (g_active != nullptr)
      return s.Finish(GpuState::kConflict, "GPU activity is already being recorded here");
  }
  uint32_t version = 0;
  CUptiResult r = api.GetVersion(&version);
  if (r != CUPTI_SUCCESS) return s.Finish(GpuState::kNoCupti, s.Why("cuptiGetVersion", r));
  s.status.cupti_version = version;
  std::string why;
  if (!CompatibleCuptiVersion(version, &why)) return s.Finish(GpuState::kNoCupti, why);

  r = api.Subscribe(&s.subscriber, &IgnoreCallback, nullptr);
  if (r == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED)
    return s.Finish(GpuState::kConflict, kConflictMessage);
  if (r != CUPTI_SUCCESS) return s.Finish(GpuState::kFailed, s.Why("cuptiSubscribe", r));
  s.subscribed = true;

  // Clocks first: records made before this would be on CUPTI's clock.
  if (api.HasTimestampCallback() && api.ActivityRegisterTimestampCallback(&HostClock) == CUPTI_SUCCESS) {
    s.status.clock_source = GpuClockSource::kHostCallback;
    s.offset_ns = 0;
  } else {
    s.status.clock_source = GpuClockSource::kMeasuredOffset;
    s.offset_ns = MeasureOffset(api);
  }
  s.status.clock_offset_ns = s.offset_ns;

  g_callbacks.store(&s, std::memory_order_release);
  r = api.ActivityRegisterCallbacks(&BufferRequested, &BufferCompleted);
  const char* failed_call = "cuptiActivityRegisterCallbacks";
  size_t enabled = 0;
  if (r == CUPTI_SUCCESS) {
    failed_call = "cuptiActivityEnable";
    for (; enabled < std::size(kKinds); ++enabled) {
      r = api.ActivityEnable(kKinds[enabled]);
      if (r != CUPTI_SUCCESS) break;
    }
  }
  if (r != CUPTI_SUCCESS) {
    for (size_t i = 0; i < enabled; ++i) api.ActivityDisable(kKinds[i]);
    api.Unsubscribe(s.subscriber);
    s.subscribed = false;
    g_callbacks.store(nullptr, std::memory_order_release);
    if (r == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED)
      return s.Finish(GpuState::kConflict, kConflictMessage);
    return s.Finish(GpuState::kFailed, s.Why(failed_call, r));
  }
  {
    std::lock_guard<std::mutex> lock(g_flush_mu);
    g_active = &s;
    std::lock_guard<std::mutex> state_lock(s.mu);
    s.recording = true;
  }
  tracer::SetSnapshotHook(&SnapshotHook);
  return s.Finish(
      GpuState::kRecording,
      "recording kernels, copies, memsets and synchronizations with CUPTI " + std::to_string(version) +
          (s.status.clock_source == GpuClockSource::kHostCallback
               ? " (timestamps from the trace's clock)"
               : " (timestamps shifted by a measured offset of " + std::to_string(s.offset_ns) + " ns)"));
}

void GpuActivityRecorder::Flush() {
  std::lock_guard<std::mutex> lock(g_flush_mu);
  if (g_active == state_.get()) FlushAndCountDrops(*state_);
}

GpuStatus GpuActivityRecorder::Stop() {
  State& s = *state_;
  {
    std::lock_guard<std::mutex> lock(g_flush_mu);
    if (g_active != &s) return status();
    tracer::SetSnapshotHook(nullptr);
    for (CUpti_ActivityKind kind : kKinds) s.api->ActivityDisable(kind);
    FlushAndCountDrops(s);  // delivers what is left
    if (s.subscribed) s.api->Unsubscribe(s.subscriber);
    s.subscribed = false;
    g_active = nullptr;
    g_callbacks.store(nullptr, std::memory_order_release);
    std::lock_guard<std::mutex> state_lock(s.mu);
    s.recording = false;
  }
  RecorderStats st = stats();
  return s.Finish(GpuState::kStopped, "recorded " + std::to_string(st.records) +
                                          " GPU activities; CUPTI dropped " +
                                          std::to_string(st.dropped_at_source));
}

bool GpuActivityRecorder::recording() const {
  std::lock_guard<std::mutex> lock(state_->mu);
  return state_->recording;
}

RecorderStats GpuActivityRecorder::stats() const {
  std::lock_guard<std::mutex> lock(state_->mu);
  return state_->stats;
}

GpuStatus GpuActivityRecorder::status() const {
  std::lock_guard<std::mutex> lock(state_->mu);
  return state_->status;
}

namespace {
std::mutex g_process_mu;
GpuActivityRecorder* g_process_recorder = nullptr;  // leaked at exit on purpose: CUPTI may still call back
GpuStatus* g_process_status = nullptr;
}  // namespace

GpuStatus StartGpuTracing(const LoadOptions& load, const RecorderOptions& options) {
  std::lock_guard<std::mutex> lock(g_process_mu);
  if (g_process_status != nullptr) return *g_process_status;
  Loaded loaded = LoadCupti(load);
  GpuStatus status;
  if (loaded.api == nullptr) {
    status = loaded.status;
    status.time_ns = tracer::NowNs();
    tracer::RecordGpuStatus(status);
  } else {
    g_process_recorder = new GpuActivityRecorder(std::move(loaded.api), options);
    status = g_process_recorder->Start();
  }
  g_process_status = new GpuStatus(status);
  return status;
}

void StopGpuTracing() {
  std::lock_guard<std::mutex> lock(g_process_mu);
  if (g_process_recorder != nullptr && g_process_recorder->recording()) g_process_recorder->Stop();
}

}  // namespace pipetune::cupti

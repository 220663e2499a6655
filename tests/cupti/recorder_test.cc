// The recorder against an in-process fake CUPTI: records built with
// cupti.h's struct layouts reach the trace with their ids, flushed at each
// snapshot and at stop; CUPTI's drops are counted; another subscriber, an
// old CUPTI and a capped buffer pool are handled; timestamps land on the
// trace's clock with or without CUPTI's timestamp callback.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <filesystem>

#include "fake_api.h"
#include "pipetune/cupti/gpu_tracing.h"
#include "pipetune/tracer/reader.h"
#include "pipetune/tracer/tracer.h"

namespace pipetune::cupti {
namespace {

using testing::FakeBehaviour;
using testing::FakeCuptiApi;
using tracer::GpuActivityKind;
using tracer::GpuState;

std::string TracePath(const std::string& name) {
  std::string path =
      (std::filesystem::temp_directory_path() / ("pipetune_cupti_" + name + ".trace")).string();
  std::remove(path.c_str());
  return path;
}

void StartSession(const std::string& path) {
  tracer::SessionOptions options;
  options.path = path;
  options.snapshot_interval_ms = 1000;  // snapshots come from Stop in these tests
  ASSERT_TRUE(tracer::Start(options).ok());
}

tracer::Trace StopAndLoad(const std::string& path) {
  EXPECT_TRUE(tracer::Stop().ok());
  StatusOr<tracer::Trace> trace = tracer::LoadTrace(path);
  EXPECT_TRUE(trace.ok()) << trace.status().message();
  return trace.ok() ? *trace : tracer::Trace{};
}

CUpti_ActivityKernel10 Kernel(uint64_t start, uint64_t end, uint32_t stream, const char* name) {
  CUpti_ActivityKernel10 k;
  std::memset(&k, 0, sizeof(k));
  k.kind = CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
  k.start = start;
  k.end = end;
  k.deviceId = 1;
  k.contextId = 7;
  k.streamId = stream;
  k.correlationId = 100 + stream;
  k.name = name;
  return k;
}

CUpti_ActivityMemcpy6 Copy(uint64_t start, uint64_t end, uint8_t kind, uint64_t bytes) {
  CUpti_ActivityMemcpy6 m;
  std::memset(&m, 0, sizeof(m));
  m.kind = CUPTI_ACTIVITY_KIND_MEMCPY;
  m.copyKind = kind;
  m.bytes = bytes;
  m.start = start;
  m.end = end;
  m.deviceId = 1;
  m.contextId = 7;
  m.streamId = 3;
  m.correlationId = 55;
  return m;
}

TEST(Recorder, RecordsEveryKindWithItsIdsAndFlushesAtTheSessionsLastSnapshot) {
  const std::string path = TracePath("kinds");
  StartSession(path);
  auto owned = std::make_unique<FakeCuptiApi>(FakeBehaviour{});
  FakeCuptiApi* api = owned.get();
  GpuActivityRecorder recorder(std::move(owned));
  tracer::GpuStatus status = recorder.Start();
  ASSERT_EQ(status.state, GpuState::kRecording) << status.message;
  EXPECT_EQ(api->enabled.size(), 4u);
  EXPECT_EQ(api->enabled[0], CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);  // not KERNEL: it serialises

  uint64_t t = api->Now();
  api->Queue(Kernel(t, t + 1000, 2, "_Z4gemmPfS_i"));
  api->Queue(Copy(t + 1000, t + 1500, CUPTI_ACTIVITY_MEMCPY_KIND_HTOD, 1 << 20));
  CUpti_ActivityMemset4 set;
  std::memset(&set, 0, sizeof(set));
  set.kind = CUPTI_ACTIVITY_KIND_MEMSET;
  set.start = t + 1500;
  set.end = t + 1600;
  set.bytes = 64;
  set.deviceId = 1;
  set.contextId = 7;
  api->Queue(set);
  CUpti_ActivitySynchronization2 sync;
  std::memset(&sync, 0, sizeof(sync));
  sync.kind = CUPTI_ACTIVITY_KIND_SYNCHRONIZATION;
  sync.type = CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_SYNCHRONIZE;
  sync.start = t + 100;
  sync.end = t + 1000;
  sync.contextId = 7;  // no device in the record: learned from the kernel's context
  sync.streamId = 2;
  api->Queue(sync);

  // Stopping the session flushes through the snapshot hook before its last snapshot.
  tracer::Trace trace = StopAndLoad(path);
  ASSERT_EQ(trace.gpu_activity.size(), 4u);
  const tracer::GpuActivity& k = trace.gpu_activity[0];
  EXPECT_EQ(k.kind, GpuActivityKind::kKernel);
  EXPECT_EQ(k.name, "gemm(float*, float*, int)");  // demangled
  EXPECT_EQ(k.device, 1u);
  EXPECT_EQ(k.context, 7u);
  EXPECT_EQ(k.stream, 2u);
  EXPECT_EQ(k.correlation_id, 102u);
  EXPECT_EQ(k.end_ns - k.start_ns, 1000u);
  const tracer::GpuActivity& c = trace.gpu_activity[1];
  EXPECT_EQ(c.kind, GpuActivityKind::kMemcpy);
  EXPECT_EQ(c.copy_kind, tracer::GpuCopyKind::kHostToDevice);
  EXPECT_EQ(c.bytes, 1u << 20);
  EXPECT_EQ(c.name, "HtoD");
  EXPECT_EQ(trace.gpu_activity[2].kind, GpuActivityKind::kMemset);
  EXPECT_EQ(trace.gpu_activity[3].kind, GpuActivityKind::kSync);
  EXPECT_EQ(trace.gpu_activity[3].device, 1u);
  EXPECT_EQ(trace.gpu_activity[3].name, "stream synchronize");
  ASSERT_TRUE(trace.has_gpu_status);
  EXPECT_EQ(trace.gpu_status.state, GpuState::kRecording);
  EXPECT_GE(api->flushes, 1);
  recorder.Stop();
  EXPECT_EQ(api->subscribed, 0);
  EXPECT_TRUE(api->enabled.empty());
}

TEST(Recorder, AnotherSubscriberIsReportedAndTracingGoesOn) {
  const std::string path = TracePath("conflict");
  StartSession(path);
  FakeBehaviour b;
  b.subscribe = CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED;
  GpuActivityRecorder recorder(std::make_unique<FakeCuptiApi>(b));
  tracer::GpuStatus status = recorder.Start();
  EXPECT_EQ(status.state, GpuState::kConflict);
  EXPECT_NE(status.message.find("another CUPTI subscriber"), std::string::npos);
  EXPECT_FALSE(recorder.recording());
  tracer::ConsumerStep(10, 20, tracer::NowNs());  // the pipeline is still recorded
  tracer::Trace trace = StopAndLoad(path);
  ASSERT_TRUE(trace.has_gpu_status);
  EXPECT_EQ(trace.gpu_status.state, GpuState::kConflict);
  ASSERT_FALSE(trace.consumer_totals.empty());
  EXPECT_EQ(trace.consumer_totals.back().steps, 1u);
}

TEST(Recorder, ConflictWhenEnablingIsReportedAndNothingStaysEnabled) {
  FakeBehaviour b;
  b.enable = CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED;
  auto owned = std::make_unique<FakeCuptiApi>(b);
  FakeCuptiApi* api = owned.get();
  GpuActivityRecorder recorder(std::move(owned));
  EXPECT_EQ(recorder.Start().state, GpuState::kConflict);
  EXPECT_EQ(api->subscribed, 0);
}

TEST(Recorder, CuptiOfAnotherMajorVersionIsRefused) {
  FakeBehaviour b;
  b.version = 26;  // a CUDA 12 CUPTI: other record layouts
  GpuActivityRecorder recorder(std::make_unique<FakeCuptiApi>(b));
  tracer::GpuStatus status = recorder.Start();
  EXPECT_EQ(status.state, GpuState::kNoCupti);
  EXPECT_NE(status.message.find("26"), std::string::npos) << status.message;
}

TEST(Recorder, CuptisDroppedRecordsReachTheTrace) {
  const std::string path = TracePath("drops");
  StartSession(path);
  FakeBehaviour b;
  b.dropped_per_buffer = 5;
  auto owned = std::make_unique<FakeCuptiApi>(b);
  FakeCuptiApi* api = owned.get();
  GpuActivityRecorder recorder(std::move(owned));
  ASSERT_EQ(recorder.Start().state, GpuState::kRecording);
  uint64_t t = api->Now();
  api->Queue(Kernel(t, t + 10, 1, "k"));
  recorder.Flush();
  api->Queue(Kernel(t + 20, t + 30, 1, "k"));
  recorder.Flush();
  EXPECT_EQ(recorder.stats().dropped_at_source, 10u);
  recorder.Stop();
  tracer::Trace trace = StopAndLoad(path);
  EXPECT_EQ(trace.gpu_activity.size(), 2u);
  EXPECT_EQ(trace.drops.gpu_records_at_source, 10u);
  EXPECT_EQ(trace.gpu_status.state, GpuState::kStopped);
}

TEST(Recorder, BufferPoolIsCappedAndWhatItRefusesIsCountedAsDropped) {
  const std::string path = TracePath("pool");
  StartSession(path);
  RecorderOptions options;
  options.buffer_bytes = 4096;
  options.buffers_preallocated = 1;
  options.max_buffers = 1;
  auto owned = std::make_unique<FakeCuptiApi>(FakeBehaviour{});
  FakeCuptiApi* api = owned.get();
  GpuActivityRecorder recorder(std::move(owned), options);
  ASSERT_EQ(recorder.Start().state, GpuState::kRecording);
  size_t size = 0;
  uint8_t* held = api->RequestBuffer(&size);  // CUPTI holds the only buffer
  ASSERT_NE(held, nullptr);
  EXPECT_EQ(size, 4096u);
  uint64_t t = api->Now();
  api->Queue(Kernel(t, t + 10, 1, "k"));
  api->Queue(Kernel(t, t + 10, 2, "k"));
  recorder.Flush();  // no buffer left: CUPTI drops both
  RecorderStats stats = recorder.stats();
  EXPECT_EQ(stats.buffers_allocated, 1u);
  EXPECT_EQ(stats.buffers_refused, 1u);
  EXPECT_EQ(stats.dropped_at_source, 2u);
  std::free(held);  // taken out of the pool by hand in this test
  recorder.Stop();
  tracer::Trace trace = StopAndLoad(path);
  EXPECT_EQ(trace.drops.gpu_records_at_source, 2u);
}

TEST(Recorder, TimestampCallbackPutsGpuTimesOnTheTraceClock) {
  const std::string path = TracePath("clock_callback");
  StartSession(path);
  auto owned = std::make_unique<FakeCuptiApi>(FakeBehaviour{});
  FakeCuptiApi* api = owned.get();
  GpuActivityRecorder recorder(std::move(owned));
  tracer::GpuStatus status = recorder.Start();
  EXPECT_EQ(status.clock_source, tracer::GpuClockSource::kHostCallback);
  uint64_t before = tracer::NowNs();
  uint64_t start = api->Now();
  uint64_t end = api->Now();
  uint64_t after = tracer::NowNs();
  api->Queue(Kernel(start, end + 1, 1, "k"));
  recorder.Stop();
  tracer::Trace trace = StopAndLoad(path);
  ASSERT_EQ(trace.gpu_activity.size(), 1u);
  EXPECT_GE(trace.gpu_activity[0].start_ns, before);
  EXPECT_LE(trace.gpu_activity[0].end_ns, after + 1);
}

TEST(Recorder, WithoutTheCallbackAMeasuredOffsetAlignsTheClocks) {
  const std::string path = TracePath("clock_offset");
  StartSession(path);
  FakeBehaviour b;
  b.timestamp_callback = false;
  b.clock_minus_host_ns = 1'700'000'000'000'000'000;  // CUPTI's default: CLOCK_REALTIME-like
  auto owned = std::make_unique<FakeCuptiApi>(b);
  FakeCuptiApi* api = owned.get();
  GpuActivityRecorder recorder(std::move(owned));
  tracer::GpuStatus status = recorder.Start();
  EXPECT_EQ(status.clock_source, tracer::GpuClockSource::kMeasuredOffset);
  EXPECT_NEAR(static_cast<double>(-status.clock_offset_ns), 1.7e18, 1e6);  // within 1 ms
  uint64_t host = tracer::NowNs();
  uint64_t gpu = api->Now();
  api->Queue(Kernel(gpu, gpu + 500, 1, "k"));
  recorder.Stop();
  tracer::Trace trace = StopAndLoad(path);
  ASSERT_EQ(trace.gpu_activity.size(), 1u);
  EXPECT_NEAR(static_cast<double>(trace.gpu_activity[0].start_ns), static_cast<double>(host), 1e6);
  EXPECT_EQ(trace.gpu_status.clock_source, tracer::GpuClockSource::kMeasuredOffset);
  EXPECT_EQ(trace.gpu_status.clock_offset_ns, status.clock_offset_ns);
}

}  // namespace
}  // namespace pipetune::cupti

// The record descriptions (schema.h): records written now read back whole,
// records of the version-1 size (no appended fields) still read, and the
// config path given in SessionOptions reaches the header.
#include "schema.h"

#include <gtest/gtest.h>

#include "pipetune/tracer/reader.h"
#include "pipetune/tracer/tracer.h"
#include "test_util.h"

namespace pipetune::tracer {
namespace {

using internal::ByteWriter;

TEST(Schema, GpuRecordRoundTripsWithItsAppendedFields) {
  GpuActivity a;
  a.kind = GpuActivityKind::kSync;
  a.device = 3;
  a.stream = 14;
  a.start_ns = 100;
  a.end_ns = 250;
  a.bytes = 4096;
  a.correlation_id = 77;
  a.context = 9;
  a.copy_kind = GpuCopyKind::kHostToDevice;
  a.name = "sync";
  std::string bytes;
  ByteWriter w(bytes);
  internal::WriteRecord(w, a);
  ASSERT_EQ(bytes.size(), internal::kRecordBytes<GpuActivity>);

  internal::ByteReader r(bytes);
  GpuActivity b;
  uint32_t name_bytes = internal::ReadRecord(r, b);
  EXPECT_FALSE(r.failed());
  EXPECT_EQ(name_bytes, 4u);
  EXPECT_EQ(b.kind, GpuActivityKind::kSync);
  EXPECT_EQ(b.device, 3u);
  EXPECT_EQ(b.stream, 14u);
  EXPECT_EQ(b.end_ns, 250u);
  EXPECT_EQ(b.correlation_id, 77u);
  EXPECT_EQ(b.context, 9u);
  EXPECT_EQ(b.copy_kind, GpuCopyKind::kHostToDevice);
}

TEST(Schema, VersionOneGpuRecordReadsWithAppendedFieldsAtDefaults) {
  GpuActivity a;
  a.context = 9;
  a.copy_kind = GpuCopyKind::kDeviceToHost;
  std::string bytes;
  ByteWriter w(bytes);
  internal::WriteRecord(w, a);
  std::string v1 = bytes.substr(0, internal::kMinRecordBytes<GpuActivity>);  // as an older writer wrote it

  internal::ByteReader r(v1);
  GpuActivity b;
  b.context = 5;  // must stay untouched: the field is absent
  internal::ReadRecord(r, b);
  EXPECT_FALSE(r.failed());
  EXPECT_EQ(b.context, 5u);
  EXPECT_EQ(b.copy_kind, GpuCopyKind::kNone);
}

// The main thread's run-queue delay, then the recorder's own CPU, appended
// to the process sample: read back where written, unknown (-1) in a sample
// an older writer wrote.
TEST(Schema, ProcessSampleRunDelayIsAppendedAndUnknownInOlderSamples) {
  ProcessSample p;
  p.cpu_ns = 5;
  p.threads = 3;
  p.main_thread_run_delay_ns = 1234;
  p.recorder_cpu_ns = 77;
  std::string bytes;
  ByteWriter w(bytes);
  internal::WriteRecord(w, p);
  ASSERT_EQ(bytes.size(), 64u);
  ProcessSample now;
  internal::ByteReader r(bytes);
  internal::ReadRecord(r, now);
  EXPECT_FALSE(r.failed());
  EXPECT_EQ(now.main_thread_run_delay_ns, 1234);
  EXPECT_EQ(now.recorder_cpu_ns, 77);
  EXPECT_EQ(now.threads, 3u);

  std::string with_delay = bytes.substr(0, 56);  // a writer from before the recorder's CPU
  ProcessSample delay_only;
  internal::ByteReader r2(with_delay);
  internal::ReadRecord(r2, delay_only);
  EXPECT_FALSE(r2.failed());
  EXPECT_EQ(delay_only.main_thread_run_delay_ns, 1234);
  EXPECT_EQ(delay_only.recorder_cpu_ns, -1);

  std::string v1 = bytes.substr(0, internal::kMinRecordBytes<ProcessSample>);
  ProcessSample old;
  internal::ByteReader r1(v1);
  internal::ReadRecord(r1, old);
  EXPECT_FALSE(r1.failed());
  EXPECT_EQ(old.cpu_ns, 5u);
  EXPECT_EQ(old.main_thread_run_delay_ns, -1);
  EXPECT_EQ(old.recorder_cpu_ns, -1);
}

TEST(Schema, GpuStatusRoundTripsThroughATrace) {
  const std::string path = testing::TempTracePath("gpu_status");
  SessionOptions options;
  options.path = path;
  ASSERT_TRUE(Start(options).ok());
  GpuStatus status;
  status.state = GpuState::kConflict;
  status.cupti_version = 26;
  status.message = "another CUPTI subscriber holds the process";
  RecordGpuStatus(status);
  ASSERT_TRUE(Stop().ok());
  StatusOr<Trace> trace = LoadTrace(path);
  ASSERT_TRUE(trace.ok()) << trace.status().message();
  ASSERT_TRUE(trace->has_gpu_status);
  EXPECT_EQ(trace->gpu_status.state, GpuState::kConflict);
  EXPECT_EQ(trace->gpu_status.cupti_version, 26u);
  EXPECT_EQ(trace->gpu_status.message, status.message);
}

TEST(Schema, ConfigPathFromSessionOptionsIsInTheHeaderMadeAbsolute) {
  const std::string path = testing::TempTracePath("config_path");
  SessionOptions options;
  options.path = path;
  // std::strings, not literals assigned: GCC 12 at -O3 raises a false
  // -Wrestrict on operator=(const char*) here.
  options.pipeline_name = std::string("p");
  options.config_path = std::string("some/dir/../config.json");
  ASSERT_TRUE(Start(options).ok());
  ASSERT_TRUE(Stop().ok());
  StatusOr<TraceHeader> header = ReadTraceHeader(path);
  ASSERT_TRUE(header.ok()) << header.status().message();
  EXPECT_EQ(header->pipeline.config_path.front(), '/');
  EXPECT_NE(header->pipeline.config_path.find("some/config.json"), std::string::npos)
      << header->pipeline.config_path;
  EXPECT_EQ(header->pipeline.name, "p");
}

}  // namespace
}  // namespace pipetune::tracer

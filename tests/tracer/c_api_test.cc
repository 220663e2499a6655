// Runs the C program in c_api_test.c and checks its trace with the C++ reader.
#include <gtest/gtest.h>

#include "pipetune/tracer/reader.h"
#include "test_util.h"

extern "C" int pipetune_test_c_api(const char* path, char* error, size_t error_size);

namespace pipetune::tracer {
namespace {

TEST(CApi, CProgramRecordsATrace) {
  const std::string path = testing::TempTracePath("c_api");
  char error[512] = {};
  ASSERT_EQ(pipetune_test_c_api(path.c_str(), error, sizeof(error)), 0) << error;
  Trace trace = testing::LoadOrFail(path);
  EXPECT_EQ(trace.header.pipeline.name, "c_pipeline_described");
  ASSERT_EQ(trace.stages.size(), 1u);  // stages retired before this session are not written
  const StageSnapshot* s = trace.LastSnapshot(trace.stages[0].id);
  ASSERT_NE(s, nullptr);
  EXPECT_EQ(trace.stages[0].name, "c_stage");
  EXPECT_EQ(s->produced, 1000u);
  EXPECT_EQ(s->consumed, 1000u);
  EXPECT_EQ(s->bytes_produced, 16000u);
  EXPECT_EQ(s->wait_input_ns, 1000u);
  EXPECT_EQ(s->wait_output_ns, 2000u);
  EXPECT_EQ(s->cpu_ns, 666u * 6);  // reported per element (one call or several), not the thread's clock
  EXPECT_EQ(s->parallelism, 3u);
  EXPECT_EQ(s->occupancy_bytes, 20);
  EXPECT_EQ(trace.consumer_totals.back().steps, 1u);
  ASSERT_EQ(trace.gpu_activity.size(), 1u);
  EXPECT_EQ(trace.gpu_activity[0].name, "c_kernel");
  EXPECT_EQ(trace.drops.gpu_records_at_source, 2u);
}

}  // namespace
}  // namespace pipetune::tracer

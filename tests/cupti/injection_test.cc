// The run-time loading paths for real, without a GPU: LoadCupti dlopen's the
// fake libcuda and libcupti built beside this test; `pipetune profile` runs
// a CUDA program that knows nothing of pipetune, and the fake driver loads
// the injection library through CUDA_INJECTION64_PATH, as NVIDIA's does.
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/wait.h>

#include <cstdio>
#include <filesystem>
#include <string>

#include "pipetune/cupti/cupti_api.h"
#include "pipetune/tracer/reader.h"

namespace pipetune::cupti {
namespace {

using tracer::GpuState;

// Sets an environment variable for the scope.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const std::string& value) : name_(name) {
    if (const char* old = getenv(name)) old_ = old, had_ = true;
    setenv(name, value.c_str(), 1);
  }
  ~ScopedEnv() { had_ ? setenv(name_, old_.c_str(), 1) : unsetenv(name_); }

 private:
  const char* name_;
  std::string old_;
  bool had_ = false;
};

TEST(LoadCupti, NoDriverIsNoGpu) {
  ScopedEnv cuda("PIPETUNE_LIBCUDA", "/no/such/libcuda.so.1");
  Loaded loaded = LoadCupti();
  EXPECT_EQ(loaded.api, nullptr);
  EXPECT_EQ(loaded.status.state, GpuState::kNoGpu);
  EXPECT_NE(loaded.status.message.find("/no/such/libcuda.so.1"), std::string::npos) << loaded.status.message;
}

TEST(LoadCupti, ALibraryWithoutCuptiGetVersionIsRefused) {
  ScopedEnv cuda("PIPETUNE_LIBCUDA", std::string(PIPETUNE_FAKE_DIR) + "/libcuda.so.1");
  ScopedEnv cupti("PIPETUNE_LIBCUPTI", "libm.so.6");
  Loaded loaded = LoadCupti();
  EXPECT_EQ(loaded.api, nullptr);
  EXPECT_EQ(loaded.status.state, GpuState::kNoCupti);
  EXPECT_NE(loaded.status.message.find("cuptiGetVersion"), std::string::npos) << loaded.status.message;
}

TEST(LoadCupti, FindsEveryFunctionOfTheFakeLibcupti) {
  ScopedEnv cuda("PIPETUNE_LIBCUDA", std::string(PIPETUNE_FAKE_DIR) + "/libcuda.so.1");
  ScopedEnv cupti("PIPETUNE_LIBCUPTI", PIPETUNE_FAKE_CUPTI);
  Loaded loaded = LoadCupti();
  ASSERT_NE(loaded.api, nullptr) << loaded.status.message;
  EXPECT_EQ(loaded.status.cupti_version, static_cast<uint32_t>(CUPTI_API_VERSION));
  EXPECT_TRUE(loaded.api->HasTimestampCallback());
  EXPECT_EQ(loaded.api->ResultString(CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED),
            "multiple subscribers (fake)");
}

// Runs `pipetune profile` on the fake CUDA program; returns its exit status.
int Profile(const std::string& trace, const std::string& extra_env = "") {
  std::string command = extra_env + " PIPETUNE_LIBCUPTI=" + PIPETUNE_FAKE_CUPTI +
                        " PIPETUNE_CUPTI_INJECTION=" + PIPETUNE_INJECTION + " " + PIPETUNE_CLI +
                        " profile --trace " + trace + " -- " + PIPETUNE_FAKE_APP + " >/dev/null";
  int status = std::system(command.c_str());
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

std::string InjectionTracePath(const std::string& name) {
  return (std::filesystem::temp_directory_path() / ("pipetune_injection_" + name + ".trace")).string();
}

TEST(Injection, ProfileRecordsTheGpuActivityOfAnUnchangedCudaProgram) {
  const std::string trace_path = InjectionTracePath("ok");
  ASSERT_EQ(Profile(trace_path), 0);
  StatusOr<tracer::Trace> trace = tracer::LoadTrace(trace_path);
  ASSERT_TRUE(trace.ok()) << trace.status().message();
  EXPECT_TRUE(trace->has_end);
  ASSERT_EQ(trace->gpu_activity.size(), 2u);
  EXPECT_EQ(trace->gpu_activity[0].copy_kind, tracer::GpuCopyKind::kHostToDevice);
  EXPECT_EQ(trace->gpu_activity[1].name, "fake_kernel");
  EXPECT_EQ(trace->gpu_activity[1].stream, 7u);
  // On the trace's clock (the fake stamps with our callback): inside the run.
  EXPECT_GT(trace->gpu_activity[1].start_ns, trace->header.clock.start_ns);
  EXPECT_LE(trace->gpu_activity[1].end_ns, trace->end.time_ns);
  EXPECT_EQ(trace->drops.gpu_records_at_source, 3u);
  ASSERT_TRUE(trace->has_gpu_status);
  EXPECT_EQ(trace->gpu_status.state, GpuState::kStopped) << trace->gpu_status.message;
}

TEST(Injection, AnotherSubscriberLeavesTheProgramRunningAndTheTraceSaysSo) {
  const std::string trace_path = InjectionTracePath("conflict");
  ASSERT_EQ(Profile(trace_path, "FAKE_CUPTI_MODE=conflict"), 0);
  StatusOr<tracer::Trace> trace = tracer::LoadTrace(trace_path);
  ASSERT_TRUE(trace.ok()) << trace.status().message();
  EXPECT_TRUE(trace->gpu_activity.empty());
  ASSERT_TRUE(trace->has_gpu_status);
  EXPECT_EQ(trace->gpu_status.state, GpuState::kConflict);
}

TEST(Injection, NoneMeansUnsetAndTheUsersOwnInjectionIsLeftAlone) {
  const std::string trace_path = InjectionTracePath("none");
  // "none" is replaced by ours: GPU activity is recorded.
  ASSERT_EQ(Profile(trace_path, "CUDA_INJECTION64_PATH=none"), 0);
  StatusOr<tracer::Trace> trace = tracer::LoadTrace(trace_path);
  ASSERT_TRUE(trace.ok()) << trace.status().message();
  EXPECT_EQ(trace->gpu_activity.size(), 2u);
  // Another tool's library is kept (here one that does not exist: the fake
  // driver says it cannot load it); our trace says where GPU activity went.
  ASSERT_EQ(Profile(trace_path, "CUDA_INJECTION64_PATH=/other/tool.so PIPETUNE_LIBCUDA=" +
                                    std::string(PIPETUNE_FAKE_DIR) + "/libcuda.so.1"),
            0);
  trace = tracer::LoadTrace(trace_path);
  ASSERT_TRUE(trace.ok()) << trace.status().message();
  EXPECT_TRUE(trace->gpu_activity.empty());
  ASSERT_TRUE(trace->has_gpu_status);
  EXPECT_NE(trace->gpu_status.message.find("CUDA_INJECTION64_PATH is already set"), std::string::npos)
      << trace->gpu_status.message;
}

}  // namespace
}  // namespace pipetune::cupti

#include "test_util.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <thread>
#include <vector>

#include "pipetune/base/clock.h"

namespace pipetune::tracer::testing {

std::string TempTracePath(const std::string& name) {
  std::string path = ::testing::TempDir() + "pipetune_" + name + "_" + std::to_string(getpid()) + ".trace";
  std::remove(path.c_str());
  return path;
}

std::string ReadFileBytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

void WriteFileBytes(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

StageId RecordSmallTrace(const std::string& path, int ms, uint32_t snapshot_interval_ms) {
  StageId source = RegisterStage({"source", "range", 1});
  StageId map = RegisterStage({"map", "map", 2});
  SessionOptions options;
  options.path = path;
  options.pipeline_name = "small";
  options.config_json = R"({"name":"small"})";
  options.snapshot_interval_ms = snapshot_interval_ms;
  EXPECT_TRUE(Start(options).ok());
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
  auto work = [&](StageId stage) {
    ScopedWorker w(stage);
    uint64_t id = 0;
    uint64_t t = NowNs();
    while (std::chrono::steady_clock::now() < deadline) {
      w->Consumed(1);
      std::this_thread::sleep_for(std::chrono::microseconds(200));
      uint64_t end = NowNs();
      w->Work(t, end, id++);
      w->Produced(1, 64);
      SetBufferOccupancy(stage, static_cast<int64_t>(id % 8), static_cast<int64_t>(id % 8) * 64);
      t = end;
    }
  };
  std::vector<std::thread> threads;
  threads.emplace_back(work, source);
  threads.emplace_back(work, map);
  threads.emplace_back(work, map);
  for (int i = 0; i < 20; ++i) {
    uint64_t now = NowNs();
    ConsumerStep(1000, 2000, now);
    GpuActivity a;
    a.kind = i % 2 ? GpuActivityKind::kMemcpy : GpuActivityKind::kKernel;
    a.stream = static_cast<uint32_t>(i % 3);
    a.start_ns = now;
    a.end_ns = now + 5000;
    a.bytes = i % 2 ? 4096 : 0;
    a.name = i % 2 ? "HtoD" : "gemm_kernel";
    RecordGpuActivity(a);
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  for (std::thread& t : threads) t.join();
  EXPECT_TRUE(Stop().ok());
  RetireStage(source);
  RetireStage(map);
  return map;
}

Trace LoadOrFail(const std::string& path) {
  StatusOr<Trace> trace = LoadTrace(path);
  EXPECT_TRUE(trace.ok()) << trace.status().message();
  return trace.ok() ? std::move(trace).value() : Trace{};
}

void BurnThreadCpu(int cpu_ms) {
  const uint64_t start = ThreadCpuNs();
  volatile uint64_t sink = 0;
  do {
    for (int i = 0; i < 10000; ++i) sink = sink + static_cast<uint64_t>(i) * 2654435761u;
  } while ((ThreadCpuNs() - start) / 1000000 < static_cast<uint64_t>(cpu_ms));
}

}  // namespace pipetune::tracer::testing

// Live resizing (Pipeline::SetParallelism / SetBuffer), what autotune does
// to a running pipeline: whatever the sizes do while elements flow, every
// element arrives exactly once, in order where the stage keeps order, and
// across epoch boundaries.
#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>

#include "test_util.h"

namespace pipetune::runtime::test {
namespace {

using ::testing::HasSubstr;

constexpr uint64_t kResizeCount = 3000;

// Pulls every output while a second thread resizes `stage` through `sizes`
// again and again (and the prefetch buffer with it) until the data ends.
std::vector<Element> DrainWhileResizing(const models::PipelineConfig& config, const BuildOptions& options,
                                        const std::vector<int>& sizes, int epochs = 1) {
  auto pipeline = Pipeline::Create(config, options);
  EXPECT_TRUE(pipeline.ok()) << pipeline.status().message();
  if (!pipeline.ok()) return {};
  std::atomic<bool> done{false};
  std::thread resizer([&] {
    for (size_t i = 0; !done.load(); ++i) {
      Status resized = (*pipeline)->SetParallelism("work", sizes[i % sizes.size()]);
      EXPECT_TRUE(resized.ok()) << resized.message();
      Status buffered = (*pipeline)->SetBuffer("prefetch", 1 + static_cast<int64_t>(i % 5) * 8);
      EXPECT_TRUE(buffered.ok()) << buffered.message();
      std::this_thread::sleep_for(std::chrono::microseconds(300));
    }
  });
  std::vector<Element> out;
  for (int epoch = 0; epoch < epochs; ++epoch) {
    (*pipeline)->StartEpoch(static_cast<uint32_t>(epoch));
    Element element;
    while (true) {
      StatusOr<bool> next = (*pipeline)->Next(&element);
      EXPECT_TRUE(next.ok()) << next.status().message();
      if (!next.ok() || !*next) break;
      out.push_back(element);
    }
  }
  done = true;
  resizer.join();
  (*pipeline)->Stop();
  return out;
}

models::PipelineConfig WorkThenPrefetch(bool ordered) {
  return RangeThen(kResizeCount, fmt::format(R"({{"name": "work", "op": "map", "fn": "cpu_work",
      "args": {{"us": 20, "jitter": 1, "deterministic": {}}}, "parallelism": 1}},
      {{"name": "prefetch", "op": "prefetch", "buffer": 2}})",
                                             ordered ? "true" : "false"));
}

TEST(Resize, EveryElementExactlyOnceWhileWorkersComeAndGo) {
  BuildOptions options;
  options.resizable_workers = 6;
  std::vector<Element> out = DrainWhileResizing(WorkThenPrefetch(false), options, {1, 4, 2, 6, 1, 3});
  auto histogram = Histogram(out);
  ASSERT_EQ(histogram.size(), kResizeCount);
  for (const auto& [leaf, n] : histogram) EXPECT_EQ(n, 1) << "id " << leaf.second;
}

TEST(Resize, AnOrderedStageKeepsItsOrderAcrossEpochs) {
  BuildOptions options;
  options.resizable_workers = 5;
  std::vector<Element> out = DrainWhileResizing(WorkThenPrefetch(true), options, {5, 1, 3, 2}, /*epochs=*/2);
  auto leaves = Leaves(out);
  ASSERT_EQ(leaves.size(), 2 * kResizeCount);
  for (size_t i = 0; i < leaves.size(); ++i) {
    ASSERT_EQ(leaves[i], std::make_pair(static_cast<uint32_t>(i / kResizeCount), i % kResizeCount))
        << "output " << i;
  }
}

// Threads of this process whose name starts with `prefix` (the runtime names
// a parallel stage's workers "NAME/INDEX").
int ThreadsNamed(const std::string& prefix) {
  int count = 0;
  for (const auto& task : std::filesystem::directory_iterator("/proc/self/task")) {
    std::ifstream comm(task.path() / "comm");
    std::string name;
    std::getline(comm, name);
    if (name.rfind(prefix, 0) == 0) ++count;
  }
  return count;
}

// ThreadsNamed once it reaches `expected` (a new thread names itself when
// it starts), or after a second.
int EventuallyThreadsNamed(const std::string& prefix, int expected) {
  for (int i = 0; i < 100 && ThreadsNamed(prefix) != expected; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return ThreadsNamed(prefix);
}

TEST(Resize, AShrunkStagesWorkersEndAndTheSummarySaysHowManyRun) {
  BuildOptions options;
  options.resizable_workers = 4;
  auto pipeline = Pipeline::Create(WorkThenPrefetch(false), options);
  ASSERT_TRUE(pipeline.ok());
  ASSERT_TRUE((*pipeline)->SetParallelism("work", 4).ok());
  Element element;
  for (int i = 0; i < 100; ++i) ASSERT_TRUE(*(*pipeline)->Next(&element));
  EXPECT_EQ(EventuallyThreadsNamed("work/", 4), 4);
  ASSERT_TRUE((*pipeline)->SetParallelism("work", 1).ok());
  EXPECT_EQ((*pipeline)->StageSummaries()[1].parallelism, 1);
  // The three above the new count leave once they have passed on what they
  // hold: the thread budget holds for what runs, not only for what works.
  for (int i = 0; i < 50 && ThreadsNamed("work/") > 1; ++i) {
    for (int j = 0; j < 20; ++j) ASSERT_TRUE(*(*pipeline)->Next(&element));
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_EQ(ThreadsNamed("work/"), 1);
  ASSERT_TRUE((*pipeline)->SetParallelism("work", 3).ok());
  EXPECT_EQ(EventuallyThreadsNamed("work/", 3), 3);
  (*pipeline)->Stop();
  // After Stop a resize changes nothing and fails nothing.
  EXPECT_TRUE((*pipeline)->SetParallelism("work", 3).ok());
}

TEST(Resize, MistakesNameTheStageAndTheKey) {
  BuildOptions options;
  options.resizable_workers = 4;
  auto pipeline = Pipeline::Create(WorkThenPrefetch(false), options);
  ASSERT_TRUE(pipeline.ok());
  EXPECT_THAT((*pipeline)->SetParallelism("nope", 2).message(), HasSubstr("no stage \"nope\""));
  EXPECT_THAT((*pipeline)->SetParallelism("work", 9).message(),
              HasSubstr("stage \"work\" (#2): key \"parallelism\": can be resized to 1..4"));
  EXPECT_THAT((*pipeline)->SetParallelism("prefetch", 2).message(), HasSubstr("key \"parallelism\""));
  EXPECT_THAT((*pipeline)->SetBuffer("work", 2).message(), HasSubstr("only prefetch stages"));
  EXPECT_THAT((*pipeline)->SetBuffer("prefetch", 0).message(), HasSubstr("must be >= 1"));

  // Built without resizable_workers, a stage keeps the size its config gives.
  auto fixed = Pipeline::Create(WorkThenPrefetch(false));
  ASSERT_TRUE(fixed.ok());
  EXPECT_THAT((*fixed)->SetParallelism("work", 2).message(), HasSubstr("can be resized to 1..1"));
}

}  // namespace
}  // namespace pipetune::runtime::test

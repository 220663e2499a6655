#include "pipetune/base/clock.h"

#include <gtest/gtest.h>

#include <chrono>
#include <thread>

namespace pipetune {
namespace {

// Spins until this thread has used `ms` of CPU by its own clock; false when
// that took over 10 s of wall time (a clock that does not advance).
bool SpinCpuMs(int ms) {
  volatile uint64_t sink = 0;
  const uint64_t start = ThreadCpuNs();
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (ThreadCpuNs() - start < static_cast<uint64_t>(ms) * 1000000u) {
    for (int i = 0; i < 1000; ++i) sink = sink + 1;
    if (std::chrono::steady_clock::now() > give_up) return false;
  }
  return true;
}

TEST(ClockTest, ThreadCpuCountsWorkAndNotSleep) {
  ASSERT_TRUE(SpinCpuMs(20)) << "the thread's CPU clock did not advance while it worked";
  const uint64_t after_work = ThreadCpuNs();
  std::this_thread::sleep_for(std::chrono::milliseconds(30));
  EXPECT_LT(ThreadCpuNs() - after_work, 10000000u) << "sleeping counted as thread CPU";
}

TEST(ClockTest, ProcessCpuCountsOtherThreads) {
  const uint64_t before = ProcessCpuNs();
  const uint64_t own_before = ThreadCpuNs();
  bool worked = false;
  std::thread worker([&] { worked = SpinCpuMs(40); });
  worker.join();
  ASSERT_TRUE(worked);
  EXPECT_GE(ProcessCpuNs() - before, 40000000u) << "the process clock missed another thread's CPU";
  EXPECT_GE(ProcessCpuSeconds(), static_cast<double>(before + 40000000u) / 1e9);
  EXPECT_LT(ThreadCpuNs() - own_before, 10000000u) << "the joining thread was charged the worker's CPU";
}

TEST(ClockTest, SecondsAreNanosecondsOverABillion) {
  const uint64_t ns = ThreadCpuNs();
  const double seconds = ThreadCpuSeconds();
  EXPECT_GE(seconds * 1e9, static_cast<double>(ns));
  EXPECT_LT(seconds * 1e9 - static_cast<double>(ns), 1e8);
}

TEST(ClockTest, AClockThatCannotBeReadSaysSo) {
  EXPECT_FALSE(ReadClockNs(static_cast<clockid_t>(-12345)).has_value());
  EXPECT_TRUE(ReadClockNs(CLOCK_MONOTONIC).has_value());
}

}  // namespace
}  // namespace pipetune

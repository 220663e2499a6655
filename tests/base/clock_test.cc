#include "pipetune/base/clock.h"

#include <gtest/gtest.h>

#include <chrono>
#include <thread>

namespace pipetune {
namespace {

// Spins until `ms` of wall time pass, so the CPU clocks have something to count.
void SpinMs(int ms) {
  volatile uint64_t sink = 0;
  const auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
  while (std::chrono::steady_clock::now() < end) sink = sink + 1;
}

TEST(ClockTest, ThreadCpuCountsWorkAndNotSleep) {
  const uint64_t before = ThreadCpuNs();
  SpinMs(30);
  const uint64_t after_work = ThreadCpuNs();
  // On a busy host the spin may hold the core for less than its wall time,
  // but it holds it for some of it.
  EXPECT_GT(after_work - before, 1000000u);
  std::this_thread::sleep_for(std::chrono::milliseconds(30));
  EXPECT_LT(ThreadCpuNs() - after_work, 10000000u) << "sleeping counted as thread CPU";
}

TEST(ClockTest, ProcessCpuCountsOtherThreads) {
  const double before = ProcessCpuSeconds();
  const uint64_t own_before = ThreadCpuNs();
  std::thread worker([] { SpinMs(40); });
  worker.join();
  EXPECT_GT(ProcessCpuSeconds() - before, 0.001);
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

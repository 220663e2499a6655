// What the tracer reads from the operating system outside the hot path: the
// clock's description, and process samples from /proc/self. Host facts
// (CollectHostFacts) are public, in tracer.h.
#pragma once

#include <cstdint>
#include <string>

#include "pipetune/tracer/records.h"

namespace pipetune::tracer::internal {

// CLOCK_MONOTONIC's description and the session's start on it and on the
// wall clock.
ClockInfo DescribeClock();

// The process since it started (not since the session started): CPU time,
// RSS, I/O and thread count. Fields that cannot be read stay at their
// defaults (-1 for the I/O counters).
ProcessSample ReadProcessSample();

// Reads a small file whole (a /proc or /sys file); empty when unreadable.
std::string ReadSmallFile(const std::string& path);

}  // namespace pipetune::tracer::internal

// CPU clocks, read one way everywhere: the calling thread's CPU time, the
// whole process's CPU time (every thread, user and system), or any POSIX
// clock by id (a thread's clock from pthread_getcpuclockid).
//
//   uint64_t before = pipetune::ThreadCpuNs();
//   Work();
//   uint64_t cpu_ns = pipetune::ThreadCpuNs() - before;
//
// Header only and POSIX only, so the tracer can use it (it sits below every
// library that links fmt). The seconds forms are the nanosecond forms / 1e9.
// The thread and process clocks of the calling thread cannot fail on Linux;
// were they to, the value is 0, which callers that take differences read as
// "no CPU measured". Only ReadClockNs says when a clock could not be read.
#pragma once

#include <time.h>

#include <cstdint>
#include <optional>

namespace pipetune {

// Nanoseconds on `clock`; nullopt when it cannot be read (a thread's CPU
// clock after that thread has exited, an id that names no clock).
inline std::optional<uint64_t> ReadClockNs(clockid_t clock) {
  timespec ts{};
  if (clock_gettime(clock, &ts) != 0) return std::nullopt;
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000u + static_cast<uint64_t>(ts.tv_nsec);
}

// CPU time the calling thread has used.
inline uint64_t ThreadCpuNs() { return ReadClockNs(CLOCK_THREAD_CPUTIME_ID).value_or(0); }
inline double ThreadCpuSeconds() { return static_cast<double>(ThreadCpuNs()) / 1e9; }

// CPU time this process has used, all threads together.
inline uint64_t ProcessCpuNs() { return ReadClockNs(CLOCK_PROCESS_CPUTIME_ID).value_or(0); }
inline double ProcessCpuSeconds() { return static_cast<double>(ProcessCpuNs()) / 1e9; }

}  // namespace pipetune

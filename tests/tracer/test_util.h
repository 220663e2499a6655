// Helpers shared by the tracer tests: temporary trace paths, file bytes, and
// short recorded sessions.
#pragma once

#include <cstdint>
#include <string>

#include "pipetune/tracer/reader.h"
#include "pipetune/tracer/tracer.h"

namespace pipetune::tracer::testing {

// A fresh path in the test's temporary directory (removed first if present).
std::string TempTracePath(const std::string& name);

std::string ReadFileBytes(const std::string& path);
void WriteFileBytes(const std::string& path, const std::string& bytes);

// Records a small pipeline for `ms` milliseconds: a stage "source" producing
// and a stage "map" with two workers, consumer steps and a few GPU records.
// Writes the trace to `path`; returns the map stage's id.
StageId RecordSmallTrace(const std::string& path, int ms, uint32_t snapshot_interval_ms = 20);

// Loads `path` and fails the current test (returning an empty Trace) if the
// trace cannot be read.
Trace LoadOrFail(const std::string& path);

// Spins until the calling thread has used `cpu_ms` of CPU time.
void BurnThreadCpu(int cpu_ms);

}  // namespace pipetune::tracer::testing

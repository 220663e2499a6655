// The Python bootstrap's record of a DataLoader process: the JSON its
// session starts with as the config (python/pipetune/_recorder.py), read
// here once for the profile (dataloader_profile.cc), the job's processes
// and the timeline's labels (ReadDataLoaderRole). Private to the analyzer.
#pragma once

#include <optional>
#include <string>

#include "pipetune/analyzer/dataloader_trace.h"
#include "pipetune/base/json.h"
#include "pipetune/base/status.h"

namespace pipetune::analyzer::internal {

// The bootstrap's record in a trace's latest pipeline info; null when none.
Json RecordOf(const tracer::PipelineInfo& info);

// `object[key]` as a T, or `fallback` when it is absent, null or of another
// type (a record from an older or newer bootstrap reads, field by field).
template <typename T>
T Get(const Json& object, const char* key, T fallback) {
  if (!object.is_object()) return fallback;
  auto it = object.find(key);
  if (it == object.end() || it->is_null()) return fallback;
  try {
    return it->get<T>();
  } catch (const Json::exception&) {
    return fallback;
  }
}

// The record's checks, in the order a user's mistake would meet them: not a
// DataLoader's main trace, an older record, no DataLoader built.
Status CheckMainRecord(const Json& record, const std::string& path);

// A loader entry's "settings": the keyword arguments it was built with.
DataLoaderSettings ReadSettings(const Json& settings);
// The loader entry's "dataset" (python/pipetune/_dataset.py); unset when the
// trace predates it.
std::optional<DataLoaderDataset> ReadDataset(const Json& entry);
// An integer field; unset when absent or not an integer.
std::optional<int> OptionalInt(const Json& record, const char* key);

// Adds a process record's "gil_probe" (python/pipetune/_gilprobe.py) to
// `sum`; a record without one, or with one that does not add up (late wakes
// beyond the wakes, a negative or non-finite figure), adds nothing.
void AddGilProbe(const Json& record, DataLoaderGilProbe& sum);

}  // namespace pipetune::analyzer::internal

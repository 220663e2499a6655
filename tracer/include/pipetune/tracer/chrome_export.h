// Chrome trace event JSON (the format ui.perfetto.dev and chrome://tracing
// open) from a trace file. Streaming: it reads the trace chunk by chunk and
// writes events as it goes, so memory stays bounded by the number of stages,
// workers and GPU streams, not by the trace's length.
//
// What it writes: one process for the pipeline with a thread track per stage
// worker (sampled elements as complete "X" slices), a "consumer" track per
// consumer thread (each step as a "wait" slice followed by a "step" slice),
// per-stage counter tracks ("C" events) for buffer occupancy and throughput
// (elements per second between consecutive snapshots), and a GPU process with
// a track per device stream. Timestamps are microseconds since the session
// started.
#pragma once

#include <cstdint>
#include <ostream>
#include <string>
#include <string_view>

#include "pipetune/base/status.h"
#include "pipetune/tracer/reader.h"

namespace pipetune::tracer {

struct ChromeExportOptions {
  // Events written at most; the rest are counted and reported in the JSON's
  // "otherData" and as a final instant event. 2 million events are about
  // 250 MB of JSON, near what a browser tab opens comfortably.
  uint64_t max_events = 2'000'000;
  bool spans = true;
  bool counters = true;
  bool consumer_steps = true;
  bool gpu = true;
};

struct ChromeExportStats {
  uint64_t events_written = 0;
  uint64_t events_dropped = 0;  // beyond max_events
  ReadReport read_report;
};

// Writes the JSON for the trace at `trace_path` to `out`. Fails (and may have
// written part of the JSON) when the trace cannot be read or `out` fails; a
// truncated trace is exported up to its last whole chunk, with the warning in
// stats->read_report.
Status ExportChrome(const std::string& trace_path, std::ostream& out, const ChromeExportOptions& options = {},
                    ChromeExportStats* stats = nullptr);

// The same for a trace already in memory.
Status ExportChromeFromMemory(std::string_view trace_bytes, std::ostream& out,
                              const ChromeExportOptions& options = {}, ChromeExportStats* stats = nullptr);

}  // namespace pipetune::tracer

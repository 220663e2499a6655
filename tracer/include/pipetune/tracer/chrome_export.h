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
#include <vector>

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

// One timeline from the traces of one run: a Chrome process per trace (the
// main process of a PyTorch DataLoader and each worker process; later, each
// rank's main trace of a multi-rank job). The same tracks, slices and
// counters as ExportChrome, per process, plus the queues given below.
//
// Time base: every event is in microseconds since the earliest session
// start among the traces. The header records each session's start on the
// clock its times are on (ClockInfo: CLOCK_MONOTONIC, start_ns) and
// CLOCK_REALTIME at the same moment (start_unix_ns). Traces of one host
// (same hostname, same clock id) share CLOCK_MONOTONIC, so their times are
// used as they are: exact. Traces of several hosts cannot share it; each is
// then moved onto CLOCK_REALTIME through its own start pair, which is as
// good as the hosts' clock synchronization (NTP: milliseconds).
//
// Processes: the Chrome pid is the traced process's pid (from the header);
// a pid seen twice (two hosts) or 0 gets one above Linux's pid_max instead.
// Each process is named "LABEL (pid N)"; a GPU's tracks get a process of
// their own, "GPU of LABEL (pid N)".
struct ChromeTimelineTrace {
  std::string path;
  std::string label;  // "main", "DataLoader worker 0"; empty: "pipeline NAME"
};

// A stage of one of the timeline's traces.
struct ChromeStageRef {
  size_t trace = 0;  // index into the traces
  std::string stage;
};

// A queue between processes, as a counter track ("C" events) on the
// consumer's process: what the producer stages have produced minus what the
// consumer stage has produced, from the snapshots' cumulative counts (so to
// within a snapshot interval; clamped at 0), at every snapshot of any of
// them. E.g. a DataLoader's batches in flight: the workers' collate minus
// the main process's next. A stage that is not in its trace adds nothing.
struct ChromeTimelineQueue {
  std::string name;  // the counter track's name
  std::string unit = "elements";
  std::vector<ChromeStageRef> producers;
  ChromeStageRef consumer;
};

struct ChromeTimelineStats {
  uint64_t events_written = 0;
  uint64_t events_dropped = 0;
  // Sentences for the user, naming the file: a trace that could not be read
  // (skipped), a truncated one (read to its last whole chunk).
  std::vector<std::string> warnings;
  // Per trace, in the order given: events written for it (0 when skipped).
  std::vector<uint64_t> events_per_trace;
};

// Writes the one timeline of `traces` to `out`. Fails, writing nothing, when
// the first trace cannot be read (a missing file, not a trace); any other
// that cannot be read is left out with a warning. Memory is bounded as for
// ExportChrome, plus one entry per snapshot of each queue's stages.
Status ExportChromeTimeline(const std::vector<ChromeTimelineTrace>& traces,
                            const std::vector<ChromeTimelineQueue>& queues, std::ostream& out,
                            const ChromeExportOptions& options = {}, ChromeTimelineStats* stats = nullptr);

}  // namespace pipetune::tracer

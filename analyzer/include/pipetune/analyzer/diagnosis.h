// Trace -> profile -> model -> Diagnosis: is the consumer waiting for data,
// which stage limits throughput, by how much, and what would help.
//
// A Diagnosis holds everything every report shows (report.h renders it), in
// plain numbers; it is computed once and rendered in any format.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "pipetune/analyzer/collector.h"
#include "pipetune/analyzer/gpu.h"
#include "pipetune/analyzer/what_if.h"
#include "pipetune/analyzer/window.h"
#include "pipetune/base/extension.h"
#include "pipetune/base/json.h"
#include "pipetune/base/status.h"
#include "pipetune/models/config.h"
#include "pipetune/models/profile.h"
#include "pipetune/models/rate_model.h"
#include "pipetune/tracer/records.h"

namespace pipetune::analyzer {

// What holds a stage back, as the stage table shows it.
enum class StageLimit {
  kCpu,      // its own CPU work
  kLatency,  // latency-bound: waits inside its work; it needs workers, not cores
  kLight,    // busy under 5% of its time
  kIdle,     // no elements in the window
};
const char* StageLimitName(StageLimit limit);  // "cpu", "latency", "light", "idle"

struct StageDiagnosis {
  std::string name;
  std::string op;
  std::string fn;
  int parallelism = 1;
  double elements = 0;             // produced in the window
  double elements_per_second = 0;  // the stage's own rate
  double visit_ratio = 1;          // its elements per pipeline output
  double cores_used = 0;           // measured CPU / window
  // Pipeline outputs per second per core of this stage's work: 1 / c_i
  // (0 when it used no measurable CPU).
  double rate_per_core = 0;
  // The most pipeline outputs per second it can feed at its parallelism (the
  // model's concurrency bound, capped by every core); +inf: unbounded.
  double max_throughput = 0;
  double cpu_ms_per_element = 0;
  double latency_ms_per_element = 0;  // measured wall of own work per element per worker
  double span_p50_ms = 0;             // from the sampled spans; 0 without spans
  double span_p99_ms = 0;
  double bytes_per_element = 0;
  double buffer_bytes = 0;          // its output buffer, mean over the window
  double busy_fraction = 0;         // of its workers' time: own work
  double wait_input_fraction = 0;   //   waiting for input
  double wait_output_fraction = 0;  //   blocked on a full output
  StageLimit limited_by = StageLimit::kCpu;
  // Where it runs, for pipelines with worker groups: "workers" (a group's
  // name), "consumer" (the consumer's thread) or "own threads"; empty otherwise.
  std::string runs_on;
  std::string scaling;  // "linear (assumed)", "USL: ..."
  bool bottleneck = false;
  uint64_t spans_dropped = 0;
};

// One point of the timeline charts, over the interval ending at `seconds`.
struct TimelinePoint {
  double seconds = 0;
  double throughput = 0;      // outputs/s
  double stall_fraction = 0;  // consumer wait / interval
  double cores_used = 0;      // process CPU / interval
  double rss_bytes = 0;
  std::vector<double> stage_busy;  // per stage: own work / (interval * parallelism)
};

// The GPU's side (gpu.h): present when the trace has GPU activity or says
// why it has none.
struct GpuSummary {
  uint64_t activities = 0;
  double busy_fraction = 0;  // the union of kernel and copy time / window, mean over devices
  GpuAnalysis analysis;      // busy, idle gaps, input stalls, verdict
  std::string verdict;       // GpuVerdictSentence, or why there is no GPU activity
  std::string status;        // the GPU source's state ("recording", "no_gpu", ...); empty: none recorded
  std::string status_message;
};

// What a kind of run adds to every report in its own words (a DataLoader's
// settings, epochs and notes: analyzer/src/dataloader_report.cc), made by
// the kind's own code when it diagnoses the run: the writers place it where
// every kind's goes and never ask which kind made it.
// A table of a report: its columns, which of them are right-aligned, its
// rows, and per row whether it is the one the report marks (the
// bottleneck, the straggler).
struct ReportTable {
  std::vector<std::string> header;
  std::vector<bool> right_aligned;
  std::vector<std::vector<std::string>> rows;
  std::vector<bool> highlighted;
};

// A run of several processes (a job's ranks): one row each, shown before
// the stage table, whose stages are then one process's.
struct ProcessesReport {
  std::string name;    // the table's heading, lower case ("ranks")
  std::string marked;  // what a highlighted row is ("straggler")
  ReportTable table;
  std::string line;            // under the table: which row is marked, or why none
  std::string stages_heading;  // whose stages the stage table then shows
};

struct KindReport {
  std::vector<std::pair<std::string, std::string>> headline;  // label, text: after the GPU's lines
  std::vector<std::pair<std::string, Json>> json;             // the JSON report's keys, after "what_if"
  std::optional<ProcessesReport> processes;                   // none for a run of one process
};

// A DataLoader run's and a job's sections: defined in
// dataloader_sections.h (not included here: the generic diagnosis does not
// know them).
struct DataLoaderSection;
struct JobSection;

struct Diagnosis {
  std::string trace_name;  // the path as given
  std::string pipeline_name;
  double trace_seconds = 0;
  double window_begin_seconds = 0;
  double window_end_seconds = 0;
  std::string window_reason;

  double measured_throughput = 0;                     // outputs/s in the window
  double predicted_throughput = 0;                    // the model, for the configuration that ran
  double prediction_ratio = 0;                        // predicted / measured (0 when nothing was measured)
  bool prediction_judged = true;                      // the window is long enough to judge it (JudgeWindow)
  models::BoundKind bound = models::BoundKind::kCpu;  // the bound that binds
  std::optional<std::string> bottleneck;              // the stage to blame; none when demand binds
  std::optional<std::string> next_limit;              // when demand binds: the stage that would limit next
  double next_limit_throughput = 0;
  double stall_fraction = 0;                // consumer time waiting for input / window
  std::optional<double> demand_throughput;  // 1 / step time
  double cores = 0;                         // usable by the run
  double cores_used = 0;                    // the process's CPU in the window; < 0 unknown
  double cpu_contention = 1;
  uint64_t peak_rss_bytes = 0;
  double mean_rss_bytes = 0;
  double buffer_bytes = 0;  // all stages' output buffers, mean over the window
  std::vector<StageDiagnosis> stages;
  std::optional<GpuSummary> gpu;

  tracer::DropCounts drops;        // events the tracer could not store
  uint64_t spans_dropped = 0;      // sum of the stages' span drops
  std::string truncation_warning;  // the reader's; empty when the trace is whole
  bool ended_cleanly = false;

  std::string summary;  // the one sentence: what limits, what would help
  std::vector<std::string> assumptions;
  std::vector<WhatIfOutcome> what_ifs;
  std::vector<TimelinePoint> timeline;

  std::optional<KindReport> kind_report;    // none for the engine's config
  Extension<DataLoaderSection> dataloader;  // a DataLoader run's settings (dataloader_sections.h)
  Extension<JobSection> job;                // a job of several processes: every rank (dataloader_job.h)

  models::Profile profile;        // the model instance behind the numbers
  models::Prediction prediction;  // for the configuration that ran
};

struct DiagnoseOptions {
  std::vector<std::string> what_ifs;  // "cores=4", "decode.parallelism=3", "cache=decode"
  // Measures on the host what the trace cannot show of its config's JPEG
  // decode (models::Profile::jpeg_entropy), for the sentence about a
  // decode-and-crop fusion: given the trace's config and the path it was
  // read from. Unset, or nullopt: the split is assumed. (The analyzer does
  // not decode; workflow/src/decode_probe.h does.)
  std::function<std::optional<models::JpegEntropyShare>(const models::PipelineConfig&, const std::string&)>
      measure_jpeg;
};

// A profiled run: the model's profile, and the config it ran when the trace
// has one (the tuner's input).
struct ProfiledRun {
  models::Profile profile;
  std::optional<models::PipelineConfig> config;
  Window window;
};

// Builds the profile from a collected trace. `extra` are other traces of the
// same pipeline (e.g. at other parallelism levels): their per-stage latencies
// become scaling points. Errors: a config in the header that does not parse,
// a trace too short to measure, traces of different pipelines.
StatusOr<ProfiledRun> ProfileCollected(const CollectedTrace& trace,
                                       const std::vector<CollectedTrace>& extra = {});

StatusOr<Diagnosis> Diagnose(const CollectedTrace& trace, const std::string& trace_name,
                             const DiagnoseOptions& options = {},
                             const std::vector<CollectedTrace>& extra = {});

// The diagnosis the model alone gives (no trace: no spans, timeline or GPU):
// what every pipeline's report shows, for a profile built elsewhere (a
// DataLoader run's). Errors: a what-if that does not parse or names a knob
// the profile does not have.
StatusOr<Diagnosis> DiagnoseProfile(models::Profile profile, const std::string& trace_name,
                                    const DiagnoseOptions& options = {});

// Reads and diagnoses; errors name the file and byte offset.
StatusOr<Diagnosis> DiagnoseTraces(const std::vector<std::string>& paths,
                                   const DiagnoseOptions& options = {});

}  // namespace pipetune::analyzer

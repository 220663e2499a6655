// The one finishing step of every diagnosis from a recording: a config's
// trace (diagnosis.cc) and a DataLoader's processes (dataloader_model.cc)
// each build a model profile and gather what the recording shows beyond the
// model into a Recording; DiagnoseRecording turns both into the Diagnosis.
// What only one kind adds to the summary (the decode-and-crop fusion's
// sentence, the GPU's wait for a DataLoader) the caller appends after, since
// it reads the diagnosis (its bottleneck).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "pipetune/analyzer/diagnosis.h"
#include "pipetune/base/json.h"
#include "pipetune/base/status.h"
#include "pipetune/models/profile.h"
#include "pipetune/tracer/records.h"

namespace pipetune::analyzer::internal {

// What a program's recorder saw and the counts cannot say, written as the
// "recording_notes" strings of the config it records (tf.data's fused and
// added ops, a script that never iterated: docs/tfdata.md); none when the
// config has none.
std::vector<std::string> RecordingNotes(const Json& config);

// A stage's sampled spans, matched to the diagnosis's stage by name.
struct StageSpans {
  std::string stage;
  double p50_ms = 0;
  double p99_ms = 0;
  uint64_t dropped = 0;
};

// What the recording shows beyond the model's numbers.
struct Recording {
  double trace_seconds = 0;
  std::vector<TimelinePoint> timeline;
  std::vector<StageSpans> spans;  // none: the recording has no sampled spans
  uint64_t peak_rss_bytes = 0;
  double mean_rss_bytes = 0;  // over the window; 0 where not sampled there
  std::optional<GpuSummary> gpu;
  tracer::DropCounts drops;
  std::string truncation_warning;  // empty when the recording is whole
  bool ended_cleanly = false;
  std::vector<std::string> assumptions;  // after the profile's own
};

// DiagnoseProfile's diagnosis with the recording's figures put on it.
// Errors: DiagnoseProfile's (a what-if that does not parse or fit).
StatusOr<Diagnosis> DiagnoseRecording(models::Profile profile, const std::string& trace_name,
                                      const DiagnoseOptions& options, Recording recording);

}  // namespace pipetune::analyzer::internal

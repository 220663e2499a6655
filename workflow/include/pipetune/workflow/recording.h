// The one place a recording's kind is decided. Every command that takes
// traces (report, tune, baseline, check) opens them here once and then asks
// the Recording, never the files, which path they take:
//
//   Recording recording = OpenRecording(request.traces);
//   if (recording.kind == RecordingKind::kDataLoader) ... else ...
//
// The CLI never opens one: it hands the paths to a workflow call, which
// does. A pipeline config given where a trace belongs is not decided here
// (tune refuses it with a hint, the reader refuses its magic).
#pragma once

#include <string>
#include <vector>

namespace pipetune::workflow {

enum class RecordingKind {
  kPipeline,    // the engine's run (pipetune run --trace) or a C++ program's (pipetune profile)
  kDataLoader,  // a PyTorch DataLoader's: the Python bootstrap's main trace (docs/pytorch.md)
  // A tf.data pipeline's (docs/tfdata.md): a pipeline trace whose config is
  // the script's ops, so every path reads it as kPipeline but tune, which
  // writes a plan keyed by call site where a config's run writes a config.
  kTfData,
};

struct Recording {
  RecordingKind kind = RecordingKind::kPipeline;
  // As given: for a pipeline, the first is profiled and the others add
  // scaling points; for a DataLoader, the main traces of one job's nodes.
  std::vector<std::string> traces;
  bool is_dataloader() const { return kind == RecordingKind::kDataLoader; }
  bool is_tfdata() const { return kind == RecordingKind::kTfData; }
};

// Decides the kind from the first trace's header (the bootstrap starts its
// session with the DataLoader's record as the config, so the header alone
// tells). Reading the traces themselves, and their errors, stay with the
// reader each path calls: a trace that cannot be read is a pipeline's here
// and refused there. No traces: a pipeline's recording of none (the gate
// then runs the config itself).
Recording OpenRecording(const std::vector<std::string>& traces);

}  // namespace pipetune::workflow

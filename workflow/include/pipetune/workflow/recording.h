// The one place a recording's kind is decided, and with it the adapter
// (workflow/src/adapter.h) that every command taking traces (report, tune,
// baseline, check) goes through:
//
//   Recording recording = OpenRecording(request.traces);
//   ... internal::AdapterOf(recording).Tune(request) ...
//
// The commands never ask which kind they hold; the adapter does what its
// kind does its own way. The CLI never opens one: it hands the paths to a
// workflow call, which does. A pipeline config given where a trace belongs
// is not decided here (tune refuses it with a hint, the reader refuses its
// magic).
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace pipetune::workflow {

namespace internal {
class RunAdapter;
}

struct Recording {
  // As given: for a pipeline, the first is profiled and the others add
  // scaling points; for a DataLoader, the main traces of one job's nodes.
  std::vector<std::string> traces;
  const internal::RunAdapter* adapter = nullptr;  // never null once opened
  // The kind's name, as a baseline records it: "config" (the engine's run,
  // `pipetune run --trace`, or a C++ program's, `pipetune profile`),
  // "dataloader" (a PyTorch DataLoader's, the Python bootstrap's main trace)
  // or "tfdata" (a tf.data script's, docs/tfdata.md).
  std::string_view kind() const;
};

// Decides the kind from the first trace's header (the bootstrap starts its
// session with the DataLoader's record, or tf.data's ops, as the config, so
// the header alone tells): the first adapter that recognizes it, else the engine's config.
// Reading the traces themselves, and their errors, stay with the adapter: a
// trace that cannot be read is a pipeline's here and refused there. No
// traces: a pipeline's recording of none (the gate then runs the config
// itself).
Recording OpenRecording(const std::vector<std::string>& traces);

}  // namespace pipetune::workflow

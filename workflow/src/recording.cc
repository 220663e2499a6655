// A recording's kind, decided once (recording.h).
#include "pipetune/workflow/recording.h"

#include "pipetune/analyzer/dataloader_trace.h"
#include "pipetune/workflow/tfdata.h"

namespace pipetune::workflow {

Recording OpenRecording(const std::vector<std::string>& traces) {
  Recording recording;
  recording.traces = traces;
  if (!traces.empty() && analyzer::IsDataLoaderTraceFile(traces.front())) {
    recording.kind = RecordingKind::kDataLoader;
  } else if (!traces.empty() && IsTfDataTraceFile(traces.front())) {
    recording.kind = RecordingKind::kTfData;
  }
  return recording;
}

}  // namespace pipetune::workflow

// A recording's kind, decided once (recording.h), and the list of kinds
// (adapter.h): adding a kind is adding its adapter to Adapters().
#include "pipetune/workflow/recording.h"

#include "adapter.h"

namespace pipetune::workflow {
namespace internal {

const std::vector<const RunAdapter*>& Adapters() {
  // The engine's config claims no recording itself: it takes every one no
  // other kind recognizes (OpenRecording). A new kind is listed here.
  static const std::vector<const RunAdapter*> adapters = {&ConfigAdapter(), &DataLoaderAdapter(),
                                                          &TfDataAdapter()};
  return adapters;
}

const RunAdapter* AdapterNamed(const std::string& kind) {
  for (const RunAdapter* adapter : Adapters()) {
    if (kind == adapter->kind()) return adapter;
  }
  return nullptr;
}

const RunAdapter& ProgramAdapter(const std::string& first_run_trace) {
  // The bootstrap records a DataLoader's or a tf.data pipeline's, each
  // recognized from the header; a trace of neither is read as a
  // DataLoader's, as before there were two.
  if (first_run_trace.empty()) return DataLoaderAdapter();
  const RunAdapter* adapter = OpenRecording({first_run_trace}).adapter;
  return adapter == &ConfigAdapter() ? DataLoaderAdapter() : *adapter;
}

const RunAdapter& SettingsAdapterFor(const std::string& apply) {
  for (const RunAdapter* adapter : Adapters()) {
    if (adapter->RecognizesSettings(apply)) return *adapter;
  }
  return DataLoaderAdapter();
}

const RunAdapter& AdapterOf(const Baseline& baseline) {
  const RunAdapter* named = AdapterNamed(baseline.kind);
  return named != nullptr ? *named : ConfigAdapter();
}

const RunAdapter& GateAdapterFor(const BaselineRequest& request, const Baseline* baseline,
                                 const std::string& first_run) {
  // A baseline of another kind than the engine's says what the runs must
  // be (its adapter refuses a request of another kind by name).
  if (baseline != nullptr && &AdapterOf(*baseline) != &ConfigAdapter()) return AdapterOf(*baseline);
  if (!request.command.empty()) return ProgramAdapter(first_run);
  return *OpenRecording(request.traces).adapter;
}

bool VerifiesProgram(const VerifyRequest& request) {
  return !request.command.empty() || request.inputs.size() >= 2;
}

const RunAdapter& VerifyAdapterFor(const VerifyRequest& request, const std::string& first_run) {
  return VerifiesProgram(request) ? ProgramAdapter(first_run) : ConfigAdapter();
}

}  // namespace internal

std::string_view Recording::kind() const { return adapter->kind(); }

Recording OpenRecording(const std::vector<std::string>& traces) {
  Recording recording;
  recording.traces = traces;
  recording.adapter = &internal::ConfigAdapter();
  if (traces.empty()) return recording;
  for (const internal::RunAdapter* adapter : internal::Adapters()) {
    if (adapter->Recognizes(traces.front())) {
      recording.adapter = adapter;
      break;
    }
  }
  return recording;
}

}  // namespace pipetune::workflow

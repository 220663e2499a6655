// The CI gate on a tf.data program (docs/tfdata.md, docs/ci-gate.md): its
// traces are pipeline traces whose config is the script's ops, so they are
// read, compared and judged as a config's runs; only making the runs
// differs: the program runs under the Python bootstrap, as a DataLoader's.
#include <memory>
#include <optional>

#include "gate_judge.h"
#include "pipetune/workflow/tfdata.h"

namespace pipetune::workflow::internal {

RunKind TfDataRunKind() {
  RunKind kind = ConfigRunKind();
  kind.run = RunProgram;
  return kind;
}

RunKind ProgramRunKind() {
  // Chosen by the first run's trace and kept for the rest: every later call
  // comes after a read.
  auto chosen = std::make_shared<std::optional<RunKind>>();
  auto choose = [chosen](const std::string& trace) -> RunKind& {
    if (!*chosen) *chosen = IsTfDataTraceFile(trace) ? TfDataRunKind() : DataLoaderRunKind();
    return **chosen;
  };
  RunKind kind;
  kind.run = RunProgram;
  kind.read = [choose](const std::string& trace, size_t index, const std::string& first_trace,
                       MeasuredRuns& measured) {
    return choose(trace).read(trace, index, first_trace, measured);
  };
  kind.diagnose = [choose](const std::string& trace) { return choose(trace).diagnose(trace); };
  kind.prepare = [](const CheckRequest&, const Baseline&) { return Status::Ok(); };
  kind.same = [chosen](const Baseline& baseline, const MeasuredRuns& measured, const std::string& name) {
    return (*chosen)->same(baseline, measured, name);
  };
  kind.judge = [chosen](const Baseline& baseline, const MeasuredRuns* measured, const JudgeOptions& options) {
    return (*chosen)->judge(baseline, measured, options);
  };
  return kind;
}

}  // namespace pipetune::workflow::internal

// What a baseline records of a pipeline (baseline.h): its identity, its
// knobs, one record per run, and the one loop that measures runs of any
// kind (MeasureRunsOf). The file itself is baseline_file.cc.
#include "pipetune/workflow/baseline.h"

#include <fmt/format.h>

#include <optional>
#include <utility>

#include "gate_judge.h"
#include "pipetune/analyzer/diagnosis.h"
#include "pipetune/base/json.h"
#include "pipetune/base/text.h"
#include "run_directory.h"

namespace pipetune::workflow {
namespace {

bool IsKnobStage(const models::StageConfig& stage) {
  return stage.op == models::Op::kPrefetch || stage.op == models::Op::kCache;
}

}  // namespace

std::string IdentityHash(const models::PipelineConfig& config) {
  Json identity = Json::array();
  for (const models::StageConfig& stage : config.stages) {
    if (IsKnobStage(stage)) continue;
    identity.push_back(
        Json{{"name", stage.name}, {"op", models::OpName(stage.op)}, {"fn", stage.fn}, {"args", stage.args}});
  }
  return internal::HashIdentity(identity);
}

namespace internal {

std::string HashIdentity(const Json& identity) {
  return fmt::format("{:016x}", Fnv1a64(DumpJson(identity), kBaselineHashBasis));
}

}  // namespace internal

std::vector<StageKnobs> KnobsOf(const models::PipelineConfig& config) {
  std::vector<StageKnobs> knobs;
  for (const models::StageConfig& stage : config.stages) {
    // The baseline file spells the location as the config does.
    std::optional<std::string> location;
    if (stage.location) location = stage.location->ConfigValue();
    knobs.push_back(
        {stage.name, models::OpName(stage.op), stage.fn, stage.parallelism, stage.buffer, location});
  }
  return knobs;
}

RunRecord RecordOf(const models::Profile& profile) {
  RunRecord record;
  record.throughput = profile.measured_throughput;
  for (const models::StageProfile& stage : profile.stages) {
    // A stage the run did not have (a DataLoader's transfer without workers)
    // has an estimated cost, not a measured one: 0, not judged.
    double cpu = stage.estimated ? 0.0 : stage.cpu_seconds_per_element;
    double wall = stage.estimated ? 0.0 : stage.measured_latency_seconds;
    record.stages.push_back({stage.name, cpu, wall, stage.elements, stage.visit_ratio});
  }
  return record;
}

namespace internal {

StatusOr<MeasuredRuns> MeasureRunsOf(const RunKind& made_by, const BaselineRequest& request, bool diagnose,
                                     const std::function<RunKind(const std::string& first_trace)>& read_by) {
  std::vector<std::string> traces =
      made_by.main_traces ? made_by.main_traces(request.traces) : request.traces;
  std::optional<RunDirectory> dir;  // lives until the traces are read
  if (traces.empty()) {
    if (request.runs < 1) return InvalidInput("--runs: at least one run is needed to measure");
    PIPETUNE_ASSIGN_OR_RETURN(RunDirectory made, RunDirectory::Make(request.trace_dir, "pipetune-gate"));
    dir.emplace(std::move(made));
    PIPETUNE_ASSIGN_OR_RETURN(traces, made_by.run(request, *dir));
  }
  const RunKind kind = read_by && !traces.empty() ? read_by(traces[0]) : made_by;
  MeasuredRuns measured;
  for (size_t i = 0; i < traces.size(); ++i) {
    PIPETUNE_ASSIGN_OR_RETURN(models::Profile profile, kind.read(traces[i], i, traces[0], measured));
    RunRecord record = RecordOf(profile);
    record.trace = traces[i];
    measured.runs.push_back(std::move(record));
    if (i == 0) measured.first_profile = std::move(profile);
  }
  if (diagnose && !traces.empty()) {
    PIPETUNE_ASSIGN_OR_RETURN(analyzer::Diagnosis diagnosis, kind.diagnose(traces.back()));
    measured.bottleneck = diagnosis.bottleneck;
    measured.why = diagnosis.summary;
  }
  return measured;
}

}  // namespace internal

}  // namespace pipetune::workflow

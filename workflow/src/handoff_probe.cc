// The stage hand-off probe (handoff_probe.h).
#include "handoff_probe.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "pipetune/base/clock.h"
#include "pipetune/runtime/pipeline.h"

namespace pipetune::workflow {
namespace {

// Process CPU seconds one run of `json` took; nullopt when it failed.
std::optional<double> CpuOfRun(const std::string& json) {
  StatusOr<models::PipelineConfig> config = models::ParseConfig(json);
  if (!config.ok()) return std::nullopt;
  double before = ProcessCpuSeconds();
  StatusOr<runtime::RunSummary> summary = runtime::RunPipeline(*config, runtime::RunOptions{});
  if (!summary.ok() || summary->outputs != static_cast<uint64_t>(kHandoffProbeElements)) return std::nullopt;
  return ProcessCpuSeconds() - before;
}

}  // namespace

bool HasAdjacentMaps(const models::PipelineConfig& config) {
  for (size_t i = 0; i + 1 < config.stages.size(); ++i) {
    if (config.stages[i].op == models::Op::kMap && config.stages[i + 1].op == models::Op::kMap) return true;
  }
  return false;
}

std::optional<double> MeasureStageHandoff() {
  const std::string work = fmt::format(R"("fn": "cpu_work", "args": {{"us": {}}})", kHandoffProbeWorkUs);
  const std::string light =
      fmt::format(R"("fn": "cpu_work", "args": {{"us": {}}})", kHandoffProbeWorkUs / 10);
  const std::string source = fmt::format(
      R"({{"name": "source", "op": "range", "args": {{"count": {}, "bytes": 64}}}})", kHandoffProbeElements);
  const std::string two = fmt::format(
      R"({{"name": "handoff_probe", "stages": [{}, {{"name": "a", "op": "map", {}}}, {{"name": "b", "op": "map", {}}}]}})",
      source, work, light);
  const std::string one = fmt::format(
      R"({{"name": "handoff_probe", "stages": [{}, {{"name": "a", "op": "map", "fn": "chain", "args": {{"steps": [{{{}}}, {{{}}}]}}}}]}})",
      source, work, light);
  std::vector<double> differences;
  for (int round = 0; round < kHandoffProbeRounds; ++round) {
    std::optional<double> separate = CpuOfRun(two);
    std::optional<double> fused = CpuOfRun(one);
    if (!separate || !fused) return std::nullopt;
    differences.push_back((*separate - *fused) / kHandoffProbeElements);
  }
  std::sort(differences.begin(), differences.end());
  return std::max(0.0, differences[differences.size() / 2]);
}

Status ValidateGivenHandoff(std::optional<double> given_ns) {
  if (given_ns && !(std::isfinite(*given_ns) && *given_ns >= 0)) {
    return InvalidInput(
        fmt::format("--handoff-ns: expected a number of nanoseconds, 0 or more, got {}", *given_ns));
  }
  return Status::Ok();
}

void HandoffCost::PriceInto(const models::PipelineConfig& config, models::Profile& profile) {
  if (!HasAdjacentMaps(config)) return;
  if (given_ns_) {
    profile.handoff_cpu_seconds = *given_ns_ / 1e9;
    profile.handoff_given = true;
    return;
  }
  if (!probed_) {
    measured_seconds_ = MeasureStageHandoff();
    probed_ = true;
  }
  profile.handoff_cpu_seconds = measured_seconds_;
  profile.handoff_given = false;
}

}  // namespace pipetune::workflow

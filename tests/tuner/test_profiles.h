// Hand-built profiles for the tuner's tests: a config plus, per stage, its
// CPU and wall milliseconds per element, turned into the counters of a
// 10-second window and through models::MakeProfile, as the analyzer would.
#pragma once

#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "pipetune/models/config.h"
#include "pipetune/models/profile.h"
#include "pipetune/tuner/plan.h"

namespace pipetune::tuner::testing {

struct StageCost {
  double cpu_ms = 0.001;   // per element produced
  double wall_ms = 0.001;  // per element per worker (own work, I/O included)
  double bytes = 1000;     // per element produced
  // Per-worker wall ms per element at other parallelism levels (for the
  // scaling fit): {parallelism, wall_ms}.
  std::vector<std::pair<int, double>> scaling;
};

// One random case of the exactness tests: what the solver takes, and the
// words a failure prints.
struct Instance {
  TuneInput input;
  Resources resources;
  std::string description;
};

inline models::PipelineConfig ParseOrDie(const std::string& json) {
  StatusOr<models::PipelineConfig> config = models::ParseConfig(json);
  EXPECT_TRUE(config.ok()) << config.status().message();
  return config.ok() ? *config : models::PipelineConfig{};
}

// Local ratio of a stage as the config implies it (batch: its size).
inline double LocalRatio(const models::StageConfig& stage) {
  if (stage.op != models::Op::kBatch) return 1;
  return static_cast<double>(stage.args.value("size", 1));
}

// A profile of `config` over a 10 s window with `outputs` pipeline outputs;
// stages not in `costs` cost a microsecond per element.
inline TuneInput MakeInput(const std::string& config_json, const std::map<std::string, StageCost>& costs,
                           double cores, double outputs = 1000) {
  models::PipelineConfig config = ParseOrDie(config_json);
  models::WindowMeasurement window;
  window.pipeline_name = config.name;
  window.begin_seconds = 1;
  window.end_seconds = 11;
  window.outputs = outputs;
  window.host_cores = cores;
  std::vector<double> visit(config.stages.size(), 1);
  for (size_t i = config.stages.size(); i-- > 1;) visit[i - 1] = visit[i] * LocalRatio(config.stages[i]);
  double cpu = 0;
  for (size_t i = 0; i < config.stages.size(); ++i) {
    const models::StageConfig& stage = config.stages[i];
    auto found = costs.find(stage.name);
    StageCost cost = found != costs.end() ? found->second : StageCost{};
    models::StageMeasurement m;
    m.name = stage.name;
    m.op = models::OpName(stage.op);
    m.parallelism = stage.parallelism;
    m.elements = outputs * visit[i];
    m.consumed = m.elements * LocalRatio(stage);
    m.bytes = m.elements * cost.bytes;
    m.cpu_seconds = m.elements * cost.cpu_ms / 1e3;
    m.work_seconds = m.elements * cost.wall_ms / 1e3;
    for (auto [p, wall_ms] : cost.scaling)
      m.scaling_points.push_back({static_cast<double>(p), p / (wall_ms / 1e3)});
    cpu += m.cpu_seconds;
    window.stages.push_back(m);
  }
  window.process_cpu_seconds = cpu;
  StatusOr<models::Profile> profile = models::MakeProfile(window, &config);
  EXPECT_TRUE(profile.ok()) << profile.status().message();
  TuneInput input;
  if (profile.ok()) input.profile = *profile;
  input.config = config;
  return input;
}

inline Resources Budget(double cores, double memory_bytes = 4e9, int max_threads = 256) {
  Resources resources;
  resources.cores = cores;
  resources.memory_bytes = static_cast<uint64_t>(memory_bytes);
  resources.max_threads = max_threads;
  return resources;
}

inline const PlannedStage* FindPlanned(const Plan& plan, const std::string& name) {
  for (const PlannedStage& stage : plan.stages) {
    if (stage.name == name) return &stage;
  }
  return nullptr;
}

inline int ParallelismOf(const Plan& plan, const std::string& name) {
  const PlannedStage* stage = FindPlanned(plan, name);
  EXPECT_NE(stage, nullptr) << name;
  return stage != nullptr ? stage->parallelism : 0;
}

}  // namespace pipetune::tuner::testing

// The CI gate's baseline: what a pipeline cost on the runs it was recorded
// from, small enough to commit beside the pipeline and review in a diff.
//
//   pipeline   its name; `identity`, a hash of what the knobs do not cover
//              (each stage's name, op, function and args, the prefetch and
//              cache stages left out since adding or removing them is a knob)
//   stages     per stage in order: name, op, fn and its knobs (parallelism,
//              prefetch buffer, cache location)
//   model      the rate model's parameters from the first run's profile, so
//              that a changed config can be judged with no run at all
//   host       the traced host's facts (cores, quota, memory)
//   runs       per run: throughput, and per stage CPU seconds per element,
//              wall seconds of own work per element, elements, visit ratio
//
// A PyTorch DataLoader's baseline (`kind` "dataloader", docs/ci-gate.md) is
// the same file: its stages are the one model's (load, transform[k]:Name,
// collate, transfer, pin_memory, DataLoaderModelProfile), `runs` come from
// that profile exactly as a config's do, `dataloader` holds its settings (the
// knobs num_workers, prefetch_factor, persistent_workers, pin_memory; batch
// size and dataset class, which with the stage names make its identity), and
// `command` the program that was run, when one was.
//
// Written atomically with a fixed key order and one run per line group, so
// that re-recording a baseline shows as a small diff.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "pipetune/analyzer/dataloader_model.h"
#include "pipetune/base/json.h"
#include "pipetune/base/status.h"
#include "pipetune/models/config.h"
#include "pipetune/models/profile.h"
#include "pipetune/tracer/records.h"

namespace pipetune::workflow {

inline constexpr int kBaselineVersion = 1;

struct StageRun {
  std::string name;
  double cpu_seconds_per_element = 0;
  double wall_seconds_per_element = 0;
  double elements = 0;
  double visit_ratio = 1;
};

// One measured run of the pipeline.
struct RunRecord {
  double throughput = 0;  // pipeline outputs per second over the steady window
  std::vector<StageRun> stages;
  std::string trace;  // the trace it was read from, when kept; not written
};

// A stage as configured: identity and knobs.
struct StageKnobs {
  std::string name;
  std::string op;
  std::string fn;
  int parallelism = 1;
  std::optional<int64_t> buffer;        // prefetch
  std::optional<std::string> location;  // cache
};

// A DataLoader's settings as the gate keeps them.
struct DataLoaderGateSettings {
  int batch_size = 1;   // identity
  std::string dataset;  // identity: the dataset's class
  // What the tuner turns, by the names the profile gives them
  // (models::KnobValues of the run's configuration): num_workers,
  // prefetch_factor, persistent_workers, pin_memory.
  Json knobs = Json::object();
};

inline constexpr const char* kConfigBaseline = "config";
inline constexpr const char* kDataLoaderBaseline = "dataloader";
inline constexpr const char* kTfDataBaseline = "tfdata";

struct Baseline {
  std::string kind = kConfigBaseline;  // kConfigBaseline, kDataLoaderBaseline or kTfDataBaseline
  std::string pipeline;
  std::string identity;  // see IdentityHash
  std::vector<StageKnobs> stages;
  models::Profile model;  // only the parameters the rate model reads
  tracer::HostFacts host;
  std::vector<RunRecord> runs;
  std::optional<DataLoaderGateSettings> dataloader;  // kind "dataloader" only
  std::vector<std::string> command;                  // the program run, when one was
};

// The hash (16 hex digits, FNV-1a 64) of the config with its knobs left out:
// stage names, ops, functions and args in order, prefetch and cache stages
// skipped. Two configs with the same identity are the same pipeline tuned
// differently.
std::string IdentityHash(const models::PipelineConfig& config);

// The knobs of every stage of `config`, in order.
std::vector<StageKnobs> KnobsOf(const models::PipelineConfig& config);

// One run's record from its profile.
RunRecord RecordOf(const models::Profile& profile);

// A DataLoader's identity and knobs: its settings as the gate keeps them,
// its stages as the baseline lists them (the model profile's, in order, op
// the stage's kind), and the hash of batch size, dataset class and stage
// names (16 hex digits, as IdentityHash).
DataLoaderGateSettings DataLoaderGateSettingsOf(const analyzer::DataLoaderSettings& settings,
                                                const models::Profile& profile);
std::vector<StageKnobs> DataLoaderStagesOf(const models::Profile& profile);
std::string DataLoaderIdentityHash(const DataLoaderGateSettings& settings,
                                   const std::vector<StageKnobs>& stages);

// Ok when every worker of the run left its trace: num_workers per iterator
// (one iterator when persistent, else one per epoch). Else kInvalidInput
// naming the main trace and how many are missing: a partial trace set would
// judge the workers' stages on part of their samples.
Status CheckWorkerTraces(const analyzer::DataLoaderProfile& run);

// How `baseline` and `check` read their arguments: one *.json file is a
// config; a first argument that is an existing file a user cannot run is a
// trace (the rest with it); anything else is a program and its arguments
// (`-- python3 train.py ...`).
enum class GateInputKind { kConfig, kTraces, kCommand };
GateInputKind ClassifyGateInputs(const std::vector<std::string>& inputs);

// Sets a request's config_path, traces or command from the arguments as
// ClassifyGateInputs reads them: BaselineRequest and CheckRequest alike.
template <typename Request>
void SetGateInputs(const std::vector<std::string>& inputs, Request& request) {
  switch (ClassifyGateInputs(inputs)) {
    case GateInputKind::kConfig:
      request.config_path = inputs.front();
      break;
    case GateInputKind::kTraces:
      request.traces = inputs;
      break;
    case GateInputKind::kCommand:
      request.command = inputs;
      break;
  }
}

// Runs `config` `runs` times traced for `seconds` each (traces in `trace_dir`,
// a temporary directory removed afterwards when empty) and builds the
// baseline; or, given traces, reads them (each trace one run; every trace must
// hold the same pipeline). Errors: the run's or the reader's, runs of
// different pipelines, a trace with no config.
//
// A DataLoader: `command` (a Python program) is run `runs` times under
// `pipetune profile`'s bootstrap, whole (`seconds` is not used); or the
// traces are DataLoader main traces, each read with its TRACE.<pid> files.
// Errors: a run that exits non-zero (kFailed: its status, the batches it
// took), a trace set missing a worker's trace, runs of different loaders.
struct BaselineRequest {
  std::string config_path;          // a config to run, or
  std::vector<std::string> traces;  // traces already recorded, or
  int runs = 5;
  double seconds = 2;
  std::string trace_dir;             // keep the traces here; empty: discard them
  std::vector<std::string> command;  // a program whose DataLoader is profiled
};
StatusOr<Baseline> RecordBaseline(const BaselineRequest& request);

// The runs `RecordBaseline` makes, without building a baseline: the CI gate's
// new runs. With `diagnose`, the last run's diagnosis (which stage binds and
// why) comes with them.
struct MeasuredRuns {
  // What a baseline records of the pipeline, for either kind: its name,
  // identity hash and stages with their knobs, as the first run had them.
  std::string pipeline;
  std::string identity;
  std::vector<StageKnobs> stages;
  models::PipelineConfig config;  // a config's runs: as the traces recorded it
  // A DataLoader's runs: their settings (`config` is then empty;
  // first_profile is the whole model profile).
  std::optional<DataLoaderGateSettings> dataloader;
  std::vector<RunRecord> runs;
  models::Profile first_profile;
  tracer::HostFacts host;
  std::optional<std::string> bottleneck;  // the last run's stage to blame
  std::string why;                        // the last run's one-sentence summary
};
StatusOr<MeasuredRuns> MeasureRuns(const BaselineRequest& request, bool diagnose);

Json BaselineToJson(const Baseline& baseline);
// Errors (kInvalidInput) name the file and the key, or the byte offset of
// malformed JSON; a newer version is refused.
StatusOr<Baseline> ParseBaseline(std::string_view text, const std::string& source_name);
StatusOr<Baseline> LoadBaseline(const std::string& path);
Status SaveBaseline(const Baseline& baseline, const std::string& path);

}  // namespace pipetune::workflow

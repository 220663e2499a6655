// The CI gate for a PyTorch DataLoader (baseline.h, check.h): its runs are
// the one model's profile of each run (analyzer::DataLoaderModelProfile), so
// that a DataLoader's baseline and check are a config's, with its settings
// as the knobs and its batch size, dataset and stage names as its identity.
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <functional>
#include <memory>
#include <optional>
#include <utility>

#include "gate_judge.h"
#include "pipetune/analyzer/dataloader_job.h"
#include "pipetune/analyzer/dataloader_model.h"
#include "pipetune/base/json.h"
#include "pipetune/models/knob_values.h"
#include "pipetune/models/rate_model.h"
#include "pipetune/workflow/dataloader.h"
#include "pipetune/workflow/profile_program.h"
#include "run_directory.h"

namespace pipetune::workflow {
namespace {

std::string Joined(const std::vector<std::string>& words) {
  std::string out;
  for (const std::string& w : words) out += (out.empty() ? "" : " ") + w;
  return out;
}

}  // namespace

// Runs the program `runs` times under the bootstrap; the main traces.
StatusOr<std::vector<std::string>> internal::RunProgram(const BaselineRequest& request,
                                                        const internal::RunDirectory& dir) {
  std::vector<std::string> traces;
  for (int run = 0; run < request.runs; ++run) {
    ProfileOptions options;
    options.trace_path = dir.File(fmt::format("run-{}.trace", run));
    options.command = request.command;
    // Each stage's CPU is compared between runs at a few percent: every
    // sample reads the thread's CPU clock (python/pipetune/_samples.py).
    options.environment.emplace_back("PIPETUNE_CPU_CLOCK_EVERY", "1");
    PIPETUNE_ASSIGN_OR_RETURN(ProfiledProgram ran, ProfileUnderBootstrap(options, std::nullopt));
    if (ran.exit_code != 0) {
      // What the trace saw before the end, when it can be read.
      std::string seen;
      StatusOr<analyzer::DataLoaderProfile> partial = analyzer::ReadDataLoaderProfile(options.trace_path);
      if (partial.ok())
        seen = fmt::format(" after {} batches ({} training steps ended, so it stopped {})", partial->batches,
                           partial->step.count,
                           partial->step.count < partial->batches ? "in a training step"
                                                                  : "in the DataLoader or after the loop");
      std::string how = ran.signal_number > 0 ? fmt::format("was killed by signal {}", ran.signal_number)
                                              : fmt::format("exited with status {}", ran.exit_code);
      return Failed(fmt::format("run {} of {}: `{}` {}{}; no verdict (its output is above)", run + 1,
                                request.runs, Joined(request.command), how, seen));
    }
    traces.push_back(options.trace_path);
  }
  return traces;
}

namespace {

// The main traces of a list that may hold whole trace sets (`run*.trace*`
// as a shell expands it): a worker's T.<pid> is read with its T, and another
// rank's T.main.<pid> with the run's T, so each is dropped when the trace it
// is read with is in the list (and left, to be refused by name, when not).
std::vector<std::string> MainTracesOf(const std::vector<std::string>& traces) {
  std::vector<std::string> mains;
  for (const std::string& t : traces) {
    size_t dot = t.rfind('.');
    bool numbered = dot != std::string::npos && dot + 1 < t.size() &&
                    t.find_first_not_of("0123456789", dot + 1) == std::string::npos;
    std::string owner = numbered ? t.substr(0, dot) : "";
    const std::string rank_infix = ".main";
    if (owner.size() > rank_infix.size() &&
        owner.compare(owner.size() - rank_infix.size(), rank_infix.size(), rank_infix) == 0) {
      owner.resize(owner.size() - rank_infix.size());
    }
    if (numbered && std::find(traces.begin(), traces.end(), owner) != traces.end()) continue;
    mains.push_back(t);
  }
  return mains;
}

}  // namespace

GateInputKind ClassifyGateInputs(const std::vector<std::string>& inputs) {
  if (inputs.empty()) return GateInputKind::kTraces;
  const std::string& first = inputs.front();
  if (inputs.size() == 1 && first.size() >= 5 && first.compare(first.size() - 5, 5, ".json") == 0)
    return GateInputKind::kConfig;
  struct stat info {};
  bool file = ::stat(first.c_str(), &info) == 0 && S_ISREG(info.st_mode);
  if (file && ::access(first.c_str(), X_OK) != 0) return GateInputKind::kTraces;
  return GateInputKind::kCommand;
}

DataLoaderGateSettings DataLoaderGateSettingsOf(const analyzer::DataLoaderSettings& settings,
                                                const models::Profile& profile) {
  return {settings.batch_size, settings.dataset,
          models::KnobValues(profile, models::ObservedConfiguration(profile))};
}

std::vector<StageKnobs> DataLoaderStagesOf(const models::Profile& profile) {
  std::vector<StageKnobs> stages;
  for (const models::StageProfile& s : profile.stages) stages.push_back({s.name, s.op_name, "", 1, {}, {}});
  return stages;
}

std::string DataLoaderIdentityHash(const DataLoaderGateSettings& settings,
                                   const std::vector<StageKnobs>& stages) {
  Json identity{{"batch_size", settings.batch_size}, {"dataset", settings.dataset}};
  for (const StageKnobs& s : stages) identity["stages"].push_back(s.name);
  return internal::HashIdentity(identity);
}

Status CheckWorkerTraces(const analyzer::DataLoaderProfile& run) {
  const analyzer::DataLoaderSettings& s = run.settings;
  if (s.num_workers <= 0) return Status::Ok();
  size_t iterators = s.persistent_workers ? 1 : std::max<size_t>(1, run.epochs.size());
  int expected = s.num_workers * static_cast<int>(iterators);
  if (run.worker_traces >= expected) return Status::Ok();
  return InvalidInput(fmt::format(
      "{}: {} of the {} worker traces expected ({}.<pid>: num_workers={} over {} iterator{}) are missing "
      "or unreadable; copy the whole trace set, the main trace with its workers'",
      run.trace_path, expected - run.worker_traces, expected, run.trace_path, s.num_workers, iterators,
      iterators == 1 ? "" : "s"));
}

namespace internal {

RunKind DataLoaderRunKind() {
  // The last run read, so that its diagnosis does not read it again.
  auto last = std::make_shared<std::optional<analyzer::DataLoaderProfile>>();
  RunKind dataloader;
  dataloader.main_traces = MainTracesOf;
  dataloader.run = RunProgram;
  dataloader.read = [last](const std::string& trace, size_t index, const std::string& first_trace,
                           MeasuredRuns& measured) -> StatusOr<models::Profile> {
    // A job of several ranks is judged on its slowest rank (docs/distributed.md).
    PIPETUNE_ASSIGN_OR_RETURN(analyzer::DataLoaderProfile run, analyzer::ReadSlowestRank(trace));
    PIPETUNE_RETURN_IF_ERROR(CheckWorkerTraces(run));
    models::Profile profile = analyzer::DataLoaderModelProfile(run);
    DataLoaderGateSettings settings = DataLoaderGateSettingsOf(run.settings, profile);
    std::vector<StageKnobs> stages = DataLoaderStagesOf(profile);
    if (index == 0) {
      measured.identity = DataLoaderIdentityHash(settings, stages);
      measured.dataloader = settings;
      measured.stages = stages;
      measured.pipeline = profile.pipeline_name;
      measured.host = run.host;
    } else if (DataLoaderIdentityHash(settings, stages) != measured.identity ||
               !(settings.knobs == measured.dataloader->knobs)) {
      return InvalidInput(
          fmt::format("{}: a run of another DataLoader, or other settings, than {}", trace, first_trace));
    }
    *last = std::move(run);
    return profile;
  };
  dataloader.diagnose = [last](const std::string&) { return analyzer::DiagnoseDataLoader(**last); };
  dataloader.prepare = [](const CheckRequest& request,
                          const Baseline& baseline) -> StatusOr<std::optional<MeasuredRuns>> {
    if (baseline.kind != kDataLoaderBaseline)
      return InvalidInput(fmt::format(
          "{}: a baseline of the pipeline config {}, not of a DataLoader: record one with `pipetune "
          "baseline -o FILE -- python3 SCRIPT`",
          request.baseline_path, baseline.pipeline));
    if (!request.config_path.empty())
      return InvalidInput(
          fmt::format("{}: a DataLoader's baseline: check it with `-- python3 SCRIPT` or its "
                      "traces, not the config {}",
                      request.baseline_path, request.config_path));
    if (request.traces.empty() && request.command.empty())
      return InvalidInput("a DataLoader's baseline needs a program (-- python3 SCRIPT) or its traces");
    return std::optional<MeasuredRuns>();  // the runs say what is judged
  };
  return dataloader;
}

Status SameDataLoader(const Baseline& baseline, const MeasuredRuns& now_runs,
                      const std::string& baseline_name) {
  if (!baseline.dataloader) return InvalidInput(baseline_name + ": not a DataLoader's baseline");
  if (!now_runs.dataloader) return InvalidInput(baseline_name + ": a DataLoader's baseline, not these runs'");
  const DataLoaderGateSettings& before = *baseline.dataloader;
  const DataLoaderGateSettings& now = *now_runs.dataloader;
  std::string other = fmt::format("{}: a baseline of another DataLoader ({}), not compared: ", baseline_name,
                                  baseline.pipeline);
  if (before.dataset != now.dataset)
    return InvalidInput(other + fmt::format("its dataset is {}, this run's {}", before.dataset, now.dataset));
  if (before.batch_size != now.batch_size)
    return InvalidInput(
        other + fmt::format("its batch_size is {}, this run's {}", before.batch_size, now.batch_size));
  // A DataLoader's stages are known by name (its identity hash).
  auto names = [](const std::vector<StageKnobs>& stages) {
    std::vector<internal::StageIdentity> ids;
    for (const StageKnobs& s : stages) ids.push_back({s.name, "", ""});
    return ids;
  };
  return internal::SameStages(names(baseline.stages), names(now_runs.stages), other, "this run", "");
}

void JudgeDataLoaderKnobs(const Baseline& baseline, const MeasuredRuns& now_runs, const JudgeOptions& options,
                          CheckReport& report) {
  const DataLoaderGateSettings now = now_runs.dataloader.value_or(DataLoaderGateSettings{});
  const models::Profile* now_profile = &now_runs.first_profile;
  const Json before = baseline.dataloader ? baseline.dataloader->knobs : Json::object();
  // Priced on the new run's profile: the baseline keeps only the stages'
  // parameters, not the worker group the settings act on. The new run's own
  // settings are its profile's observed configuration; the baseline's are
  // set on it by name.
  std::function<double(const Json&)> predict;
  if (!now_profile->groups.empty())
    predict = [now_profile](const Json& knobs) {
      models::Configuration traced = models::ObservedConfiguration(*now_profile);
      return models::Predict(*now_profile, models::WithKnobValues(*now_profile, traced, knobs)).throughput;
    };
  // Each setting that changed, with the baseline's others, to price it
  // alone; in the baseline's order (the profile's: num_workers first).
  std::vector<internal::KnobDifference<Json>> differences;
  for (const auto& [knob, was] : before.items()) {
    auto is = now.knobs.find(knob);
    if (is == now.knobs.end() || *is == was) continue;
    Json alone = before;
    alone[knob] = *is;
    differences.push_back({{"workers", knob, was.dump(), is->dump(), std::nullopt}, std::move(alone)});
  }
  internal::JudgeKnobs(predict, before, now.knobs, std::move(differences), options, report);
}

}  // namespace internal

}  // namespace pipetune::workflow

#include "pipetune/workflow/dataloader.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>

#include "pipetune/analyzer/dataloader_job.h"
#include "pipetune/base/files.h"
#include "pipetune/base/json.h"
#include "pipetune/base/size.h"
#include "pipetune/models/config.h"
#include "pipetune/models/rate_model.h"
#include "pipetune/tuner/solver.h"
#include "pipetune/workflow/profile_program.h"
#include "pipetune/workflow/tfdata.h"
#include "pipetune/workflow/verify.h"

namespace pipetune::workflow {
namespace fs = std::filesystem;

StatusOr<std::string> FindPythonBootstrap() {
  std::vector<fs::path> candidates;
  if (const char* env = std::getenv("PIPETUNE_PYTHON_DIR"); env != nullptr && *env != '\0') {
    candidates.emplace_back(env);
  } else {
    std::error_code error;
    fs::path exe = fs::read_symlink("/proc/self/exe", error);
    if (!error) {
      fs::path dir = exe.parent_path();
      candidates.push_back(dir.parent_path() / "python");
      candidates.push_back(dir.parent_path() / PIPETUNE_INSTALL_LIBDIR / "pipetune" / "python");  // installed
    }
  }
  std::string looked;
  for (const fs::path& c : candidates) {
    std::error_code error;
    if (fs::exists(c / "sitecustomize.py", error) && fs::exists(c / "pipetune" / "dataloader.py", error)) {
      return fs::absolute(c, error).lexically_normal().string();
    }
    looked += (looked.empty() ? "" : ", ") + c.string();
  }
  return InvalidInput(
      fmt::format("the Python bootstrap (sitecustomize.py) is not in {} "
                  "(build the pipetune target, or set PIPETUNE_PYTHON_DIR)",
                  looked.empty() ? "any known place" : looked));
}

namespace {

// The keyword arguments of one object of a kwargs file; `where` names it in
// errors ("" at the top, "ranks"."1". for a rank's own).
Status CheckKwargs(const Json& kwargs, const std::string& path, const std::string& where) {
  for (const auto& [key, value] : kwargs.items()) {
    if (key == "num_workers" || key == "prefetch_factor") {
      if (value.is_null() && key == "prefetch_factor") continue;
      if (!value.is_number_integer() || value.get<int64_t>() < (key == "num_workers" ? 0 : 1)) {
        return InvalidInput(fmt::format("{}: key {}\"{}\": expected an integer >= {}, got {}", path, where,
                                        key, key == "num_workers" ? 0 : 1, value.dump()));
      }
    } else if (key == "persistent_workers" || key == "pin_memory") {
      if (!value.is_boolean()) {
        return InvalidInput(
            fmt::format("{}: key {}\"{}\": expected true or false, got {}", path, where, key, value.dump()));
      }
    } else if (key == "ranks" && where.empty()) {
      // A job's plan that sets some ranks apart (docs/distributed.md).
      if (!value.is_object()) {
        return InvalidInput(
            fmt::format("{}: key \"ranks\": expected an object of rank numbers, got {}", path, value.dump()));
      }
      for (const auto& [rank, entry] : value.items()) {
        if (rank.empty() || rank.find_first_not_of("0123456789") != std::string::npos || !entry.is_object()) {
          return InvalidInput(fmt::format(
              "{}: key \"ranks\".\"{}\": expected a rank number and an object of keyword arguments", path,
              rank));
        }
        PIPETUNE_RETURN_IF_ERROR(CheckKwargs(entry, path, fmt::format("\"ranks\".\"{}\".", rank)));
      }
    } else {
      return InvalidInput(
          fmt::format("{}: key {}\"{}\": not a DataLoader setting pipetune applies (num_workers, "
                      "prefetch_factor, persistent_workers, pin_memory{})",
                      path, where, key, where.empty() ? "; ranks" : ""));
    }
  }
  return Status::Ok();
}

}  // namespace

StatusOr<Json> ReadDataLoaderKwargs(const std::string& path) {
  PIPETUNE_ASSIGN_OR_RETURN(std::string text, ReadFile(path, "the DataLoader settings"));
  Json j = Json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) {
    return InvalidInput(fmt::format("{}: expected a JSON object of DataLoader keyword arguments", path));
  }
  const Json& kwargs = j.contains("dataloader_kwargs") ? j["dataloader_kwargs"] : j;
  PIPETUNE_RETURN_IF_ERROR(CheckKwargs(kwargs, path, ""));
  return kwargs;
}

StatusOr<PythonEnvironment> PythonBootstrapEnvironment(const std::string& apply_path) {
  PythonEnvironment env;
  StatusOr<std::string> dir = FindPythonBootstrap();
  if (!apply_path.empty()) {
    if (!dir.ok()) return dir.status().WithContext("--apply");
    // A tf.data plan (tfdata.h) or DataLoader keyword arguments: the file says which.
    const bool tfdata = IsTfDataPlanFile(apply_path);
    PIPETUNE_RETURN_IF_ERROR(tfdata ? ReadTfDataPlan(apply_path).status()
                                    : ReadDataLoaderKwargs(apply_path).status());
    std::error_code error;
    env.variables.emplace_back(tfdata ? "PIPETUNE_TFDATA_APPLY" : "PIPETUNE_DATALOADER_APPLY",
                               fs::absolute(apply_path, error).string());
  }
  if (!dir.ok()) {
    env.warning = "Python DataLoaders will not be recorded: " + dir.status().message();
    return env;
  }
  const char* existing = std::getenv("PYTHONPATH");
  std::string path = *dir;
  if (existing != nullptr && *existing != '\0') path += std::string(":") + existing;
  env.variables.emplace_back("PYTHONPATH", path);
  return env;
}

std::string DataLoaderKwargsPath(const std::string& requested, const std::string& trace) {
  if (!requested.empty()) return requested;
  fs::path p(trace);
  return (p.parent_path() / (p.stem().string() + ".dataloader.json")).string();
}

Json DataLoaderKwargs(const tuner::DataLoaderKnobs& k) {
  Json j;
  j["num_workers"] = k.num_workers;
  j["prefetch_factor"] = k.num_workers > 0 ? Json(k.prefetch_factor) : Json();
  j["persistent_workers"] = k.num_workers > 0 && k.persistent_workers;
  j["pin_memory"] = k.pin_memory;
  return j;
}

std::string DataLoaderCodeChange(const tuner::DataLoaderKnobs& k) {
  auto flag = [](bool b) { return b ? "True" : "False"; };
  if (k.num_workers == 0)
    return fmt::format("DataLoader(dataset, ..., num_workers=0, pin_memory={})", flag(k.pin_memory));
  return fmt::format(
      "DataLoader(dataset, ..., num_workers={}, prefetch_factor={}, persistent_workers={}, pin_memory={})",
      k.num_workers, k.prefetch_factor, flag(k.persistent_workers), flag(k.pin_memory));
}

namespace {

// An IterableDataset is one stream: with N workers each reads its own copy,
// so the plan's workers deliver each sample N times unless the dataset
// shards itself by get_worker_info().
void AddStreamNotes(DataLoaderTuneResult& result) {
  const analyzer::DataLoaderProfile& run = result.run;
  if (!run.settings.iterable || result.knobs.num_workers == run.settings.num_workers ||
      result.knobs.num_workers <= 1) {
    return;
  }
  std::string note = fmt::format(
      "num_workers={} with an IterableDataset: the dataset must shard its stream by "
      "torch.utils.data.get_worker_info() (each worker reads its own part), or every worker delivers every "
      "sample",
      result.knobs.num_workers);
  result.plan.notes.push_back(note);
  if (run.settings.num_workers > 0 && run.sharded_by_worker_info) return;
  result.warnings.push_back(
      fmt::format("{}: {}; {}", run.trace_path, note,
                  run.settings.num_workers == 0
                      ? "the traced run had no workers, so whether it shards could not be seen"
                      : fmt::format("the traced workers did not ({} of {} called get_worker_info())",
                                    run.sharded_workers, run.worker_traces)));
}

}  // namespace

namespace {

// Ranks on one node share its cores and memory, each with its own workers:
// the node's cores (the flags', else the traced host's) by what each rank
// really uses (analyzer::NodeCoreShare: a rank waiting at the all-reduce
// holds no core), its memory and threads evenly.
void ShareNode(const analyzer::JobTuning& tuning, tuner::Resources& resources) {
  const int k = tuning.ranks_per_node;
  resources.cores *= tuning.node_core_share;
  resources.memory_bytes /= static_cast<uint64_t>(k);
  resources.max_threads = std::max(1, resources.max_threads / k);
  resources.cores_source += fmt::format(", shared by {} ranks by their CPU per batch", k);
  resources.memory_source += fmt::format(", shared by {} ranks", k);
}

std::string JobNote(const analyzer::JobTuning& tuning, const tuner::Resources& resources) {
  std::string who = tuning.rank ? fmt::format("rank {}", *tuning.rank) : std::string("the slowest rank");
  return fmt::format(
      "a job of {} processes, at most {} on one node: each rank's budget is its share of the node ({:.2f} "
      "cores, in proportion to its CPU per batch, which a wait at the all-reduce does not hold; {}); the "
      "plan is {}'s ({}), at the job's step, and applies to every rank (--apply in each rank's process)",
      tuning.processes, tuning.ranks_per_node, resources.cores,
      FormatBytes(static_cast<double>(resources.memory_bytes)), who,
      tuning.straggler ? "the straggler: its input binds the job" : "its input delivers least");
}

// The CPU the other ranks on the planned rank's node use at the job's rate
// with `knobs` applied: each rank's CPU grows with its throughput, and DDP
// holds every rank to the job's.
double PeersCores(const std::vector<analyzer::DataLoaderProfile>& peers, const tuner::DataLoaderKnobs& knobs,
                  double job_rate) {
  double cores = 0;
  for (const analyzer::DataLoaderProfile& peer : peers) {
    models::Profile profile = analyzer::DataLoaderModelProfile(peer);
    models::Prediction alone = models::Predict(profile, tuner::ConfigurationFor(profile, knobs));
    if (alone.throughput > 0) cores += alone.cores_used * std::min(1.0, job_rate / alone.throughput);
  }
  return cores;
}

// One setting for every rank holds the planned rank to its share of the
// node at the traced CPU per batch; the other ranks may need less at the
// plan's setting and the job's rate. What the planned rank
// would reach with the rest of the node (a setting of its own), and, when
// that pays (5% or more), its knobs, written under "ranks" in the kwargs.
std::optional<tuner::DataLoaderKnobs> PerRankSetting(const analyzer::JobTuning& tuning,
                                                     const tuner::TuneInput& input,
                                                     const tuner::Resources& even, double node_cores,
                                                     tuner::Objective objective, tuner::Plan& plan,
                                                     const tuner::DataLoaderKnobs& knobs) {
  if (tuning.ranks_per_node < 2 || tuning.node_peers.empty() || !tuning.rank) return std::nullopt;
  const int others = static_cast<int>(tuning.node_peers.size());
  const double peers = PeersCores(tuning.node_peers, knobs, plan.predicted_throughput) +
                       node_cores / tuning.ranks_per_node * std::max(0, tuning.ranks_per_node - 1 - others);
  tuner::Resources more = even;
  more.cores = node_cores - peers;
  if (more.cores <= even.cores * 1.01) return std::nullopt;
  StatusOr<tuner::Plan> own = tuner::Solve(input, more, objective);
  if (!own.ok() || !own->configuration || plan.predicted_throughput <= 0) return std::nullopt;
  const double gain = own->predicted_throughput / plan.predicted_throughput;
  tuner::DataLoaderKnobs own_knobs = tuner::DataLoaderKnobsOf(input.profile, *own->configuration);
  if (gain < 1.05 || own_knobs == knobs) {
    plan.notes.push_back(fmt::format(
        "a setting of rank {}'s own would gain {:.0f}% (the other ranks on its node need {:.2f} cores at the "
        "job's rate, leaving it {:.2f}): one setting for every rank",
        *tuning.rank, 100 * (gain - 1), peers, more.cores));
    return std::nullopt;
  }
  plan.notes.push_back(fmt::format(
      "a setting of rank {}'s own gains {:.0f}%: the other ranks on its node need {:.2f} cores at the job's "
      "rate, leaving it {:.2f}, where num_workers={} reaches {:.1f} batches/s; written under \"ranks\" in "
      "the "
      "kwargs file",
      *tuning.rank, 100 * (gain - 1), peers, more.cores, own_knobs.num_workers, own->predicted_throughput));
  return own_knobs;
}

}  // namespace

StatusOr<DataLoaderTuneResult> PlanDataLoaderTrace(const DataLoaderTuneRequest& request) {
  // A job of several processes (docs/distributed.md): one plan for every
  // rank, made for the rank whose input delivers least, within its share
  // of the node. A single process's job is that process.
  PIPETUNE_ASSIGN_OR_RETURN(analyzer::DataLoaderJob job, analyzer::ReadDataLoaderJob({request.trace}));
  PIPETUNE_ASSIGN_OR_RETURN(analyzer::JobTuning tuning, analyzer::JobTuningRun(job));
  analyzer::DataLoaderProfile run = std::move(tuning.run);
  tuner::TuneInput input;
  input.profile = analyzer::DataLoaderModelProfile(run);
  PIPETUNE_ASSIGN_OR_RETURN(
      tuner::Resources resources,
      tuner::ResolveResources(input, {run.host.UsableCores(), run.host.UsableMemoryBytes()},
                              request.budgets));
  const double node_cores = resources.cores;
  if (tuning.ranks_per_node > 1) ShareNode(tuning, resources);
  PIPETUNE_ASSIGN_OR_RETURN(tuner::Plan plan, tuner::Solve(input, resources, request.objective));
  if (tuning.processes > 1) plan.notes.push_back(JobNote(tuning, resources));
  DataLoaderTuneResult result;
  result.knobs = tuner::DataLoaderKnobsOf(input.profile, *plan.configuration);
  Json kwargs = DataLoaderKwargs(result.knobs);
  if (std::optional<tuner::DataLoaderKnobs> own =
          PerRankSetting(tuning, input, resources, node_cores, request.objective, plan, result.knobs)) {
    kwargs["ranks"][std::to_string(*tuning.rank)] = DataLoaderKwargs(*own);
  }
  result.plan = std::move(plan);
  result.run = std::move(run);
  result.output = DataLoaderKwargsPath(request.output, request.trace);
  result.code_change = DataLoaderCodeChange(result.knobs);
  result.kwargs = std::move(kwargs);
  AddStreamNotes(result);
  return result;
}

StatusOr<DataLoaderTuneResult> TuneDataLoaderTrace(const DataLoaderTuneRequest& request) {
  PIPETUNE_ASSIGN_OR_RETURN(DataLoaderTuneResult result, PlanDataLoaderTrace(request));
  PIPETUNE_RETURN_IF_ERROR(WriteFileAtomically(result.output, DumpJson(result.kwargs, 2) + "\n"));
  return result;
}

std::string DataLoaderRoundTrace(const std::string& trace, int round) {
  if (round == 0) return trace;
  fs::path p(trace);
  return (p.parent_path() / fmt::format("{}-round-{}{}", p.stem().string(), round, p.extension().string()))
      .string();
}

StatusOr<DataLoaderVerifyResult> VerifyDataLoader(const DataLoaderVerifyOptions& options) {
  if (options.command.empty())
    return InvalidInput("--verify: no program: pipetune tune --verify -- COMMAND ...");
  DataLoaderVerifyResult result;
  std::string kwargs_path;
  std::optional<tuner::DataLoaderKnobs> applied_knobs;  // none: the script's own settings
  double predicted = 0;
  auto step = [&](int round, bool plan_next) -> StatusOr<LoopStep> {
    DataLoaderRound r;
    r.index = round;
    r.knobs = applied_knobs;
    r.applied = r.knobs ? DataLoaderKwargs(*r.knobs) : Json();
    r.predicted_batches_per_second = predicted;
    r.trace = DataLoaderRoundTrace(options.trace, round);
    if (round > 0 || !options.first_round_ran) {
      PIPETUNE_ASSIGN_OR_RETURN(PythonEnvironment env,
                                PythonBootstrapEnvironment(round == 0 ? "" : kwargs_path));
      if (!env.warning.empty()) return InvalidInput(env.warning);
      ProfileOptions profile_options;
      profile_options.trace_path = r.trace;
      profile_options.interval_ms = options.interval_ms;
      profile_options.command = options.command;
      profile_options.environment = env.variables;
      profile_options.stdout_to_stderr = options.program_stdout_to_stderr;
      PIPETUNE_ASSIGN_OR_RETURN(ProfiledProgram ran, ProfileProgram(profile_options));
      r.exit_code = ran.exit_code;
      if (ran.exit_code != 0) {
        return Failed(
            fmt::format("round {}: {} exited with status {}", round, options.command[0], ran.exit_code));
      }
    }
    // Measuring a DataLoader run is reading its trace into the model, which
    // plans as well: the plan of the last round is made and left unused.
    DataLoaderTuneRequest request;
    request.trace = r.trace;
    request.budgets = options.budgets;
    request.objective = options.objective;
    request.output = DataLoaderKwargsPath("", r.trace);
    StatusOr<DataLoaderTuneResult> tuned = TuneDataLoaderTrace(request);
    if (!tuned.ok()) return tuned.status().WithContext(fmt::format("round {}", round));
    r.measured_batches_per_second = tuned->plan.measured_throughput;
    r.workers = tuned->run.settings.num_workers;
    result.rounds.push_back(r);
    LoopStep step_result{r.measured_batches_per_second, 1 + r.workers, tuned->plan.demand_throughput, false};
    if (plan_next) {
      step_result.plan_changes_something =
          !(tuned->knobs == tuner::TracedKnobs(analyzer::DataLoaderModelProfile(tuned->run)));
      kwargs_path = tuned->output;
      applied_knobs = tuned->knobs;
      predicted = tuned->plan.predicted_throughput;
    }
    return step_result;
  };
  PIPETUNE_ASSIGN_OR_RETURN(LoopOutcome outcome, RunTuningLoop(options.rounds, options.objective, step));
  result.best = outcome.best;
  result.stop_reason = outcome.stop_reason;
  const DataLoaderRound& best = result.rounds[result.best];
  if (best.knobs) {
    result.knobs = *best.knobs;
  } else {
    // The script's own settings measured best: write them, so that applying
    // the file changes nothing.
    StatusOr<analyzer::DataLoaderProfile> profile = analyzer::ReadDataLoaderProfile(best.trace);
    if (!profile.ok()) return profile.status();
    result.knobs = tuner::TracedKnobs(analyzer::DataLoaderModelProfile(*profile));
  }
  result.output = DataLoaderKwargsPath(options.output, options.trace);
  PIPETUNE_RETURN_IF_ERROR(
      WriteFileAtomically(result.output, DumpJson(DataLoaderKwargs(result.knobs), 2) + "\n"));
  result.code_change = DataLoaderCodeChange(result.knobs);
  return result;
}

std::string FormatDataLoaderRounds(const DataLoaderVerifyResult& result) {
  std::string out =
      fmt::format("{:<6} {:<60} {:>12} {:>12}\n", "round", "settings", "measured b/s", "predicted");
  for (const DataLoaderRound& r : result.rounds) {
    std::string settings = r.applied.is_null() ? "the script's own" : r.applied.dump();
    out +=
        fmt::format("{:<6} {:<60} {:>12.2f} {:>12}{}\n", r.index, settings, r.measured_batches_per_second,
                    r.index == 0 ? std::string("-") : fmt::format("{:.2f}", r.predicted_batches_per_second),
                    &r == &result.rounds[result.best] ? "  <- best" : "");
  }
  return out + fmt::format("stopped: {}\n", result.stop_reason);
}

std::string FormatDataLoaderVerify(const DataLoaderVerifyResult& result) {
  return FormatDataLoaderRounds(result) +
         fmt::format("DataLoader keyword arguments (round {}): {}\ncode change: {}\n",
                     result.rounds[result.best].index, result.output, result.code_change);
}

Json DataLoaderVerifyToJson(const DataLoaderVerifyResult& result) {
  Json rounds = Json::array();
  for (const DataLoaderRound& r : result.rounds) {
    rounds.push_back({{"round", r.index},
                      {"settings", r.applied},
                      {"predicted_throughput", r.predicted_batches_per_second},
                      {"measured_throughput", r.measured_batches_per_second},
                      {"workers", r.workers}});
  }
  Json document = VerifyLoopToJson(std::move(rounds), result.best, result.stop_reason);
  document["output"] = result.output;
  document["dataloader_kwargs"] = DataLoaderKwargs(result.knobs);
  document["code_change"] = result.code_change;
  return document;
}

}  // namespace pipetune::workflow

// One plan for a DataLoader's job (dataloader_plan.h): the job split per rank,
// each rank's share of its node, a setting of a rank's own when it pays,
// and the notes an IterableDataset needs.
#include "pipetune/workflow/dataloader_plan.h"

#include <fmt/format.h>

#include <algorithm>
#include <optional>

#include "pipetune/analyzer/dataloader_job.h"
#include "pipetune/analyzer/dataloader_model.h"
#include "pipetune/base/files.h"
#include "pipetune/base/json.h"
#include "pipetune/base/size.h"
#include "pipetune/models/knob_values.h"
#include "pipetune/models/rate_model.h"
#include "pipetune/tuner/solver.h"
#include "pipetune/workflow/dataloader_kwargs.h"

namespace pipetune::workflow {

namespace {

// An IterableDataset is one stream: with N workers each reads its own copy,
// so the plan's workers deliver each sample N times unless the dataset
// shards itself by get_worker_info().
void AddStreamNotes(const analyzer::DataLoaderProfile& run, int workers, tuner::Plan& plan,
                    std::vector<std::string>& warnings) {
  if (!run.settings.iterable || workers == run.settings.num_workers || workers <= 1) return;
  std::string note = fmt::format(
      "num_workers={} with an IterableDataset: the dataset must shard its stream by "
      "torch.utils.data.get_worker_info() (each worker reads its own part), or every worker delivers every "
      "sample",
      workers);
  plan.notes.push_back(note);
  if (run.settings.num_workers > 0 && run.sharded_by_worker_info) return;
  warnings.push_back(
      fmt::format("{}: {}; {}", run.trace_path, note,
                  run.settings.num_workers == 0
                      ? "the traced run had no workers, so whether it shards could not be seen"
                      : fmt::format("the traced workers did not ({} of {} called get_worker_info())",
                                    run.sharded_workers, run.worker_traces)));
}

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
// with the plan's settings (`knobs`: models::KnobValues of its
// configuration) applied: each rank's CPU grows with its throughput, and
// DDP holds every rank to the job's.
double PeersCores(const std::vector<analyzer::DataLoaderProfile>& peers, const Json& knobs, double job_rate) {
  double cores = 0;
  for (const analyzer::DataLoaderProfile& peer : peers) {
    models::Profile profile = analyzer::DataLoaderModelProfile(peer);
    models::Prediction alone = models::Predict(
        profile, models::WithKnobValues(profile, models::ObservedConfiguration(profile), knobs));
    if (alone.throughput > 0) cores += alone.cores_used * std::min(1.0, job_rate / alone.throughput);
  }
  return cores;
}

// One setting for every rank holds the planned rank to its share of the
// node at the traced CPU per batch; the other ranks may need less at the
// plan's setting and the job's rate. What the planned rank
// would reach with the rest of the node (a setting of its own), and, when
// that pays (5% or more), its keyword arguments, written under "ranks" in
// the kwargs file.
std::optional<Json> PerRankSetting(const analyzer::JobTuning& tuning, const tuner::TuneInput& input,
                                   const tuner::Resources& even, double node_cores,
                                   tuner::Objective objective, tuner::Plan& plan) {
  if (tuning.ranks_per_node < 2 || tuning.node_peers.empty() || !tuning.rank) return std::nullopt;
  const int others = static_cast<int>(tuning.node_peers.size());
  const Json knobs = models::KnobValues(input.profile, *plan.configuration);
  const double peers = PeersCores(tuning.node_peers, knobs, plan.predicted_throughput) +
                       node_cores / tuning.ranks_per_node * std::max(0, tuning.ranks_per_node - 1 - others);
  tuner::Resources more = even;
  more.cores = node_cores - peers;
  if (more.cores <= even.cores * 1.01) return std::nullopt;
  StatusOr<tuner::Plan> own = tuner::Solve(input, more, objective);
  if (!own.ok() || !own->configuration || plan.predicted_throughput <= 0) return std::nullopt;
  const double gain = own->predicted_throughput / plan.predicted_throughput;
  const Json own_knobs = models::KnobValues(input.profile, *own->configuration);
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
      *tuning.rank, 100 * (gain - 1), peers, more.cores, own->configuration->group_workers.at(0),
      own->predicted_throughput));
  return DataLoaderKwargs(input.profile, *own->configuration);
}

// What the solver knows of a DataLoader's run: its model profile alone (no
// config to rewrite, no measured output spread, no stages that fold). The
// one profile the plan is made on: the kwargs and the per-rank setting
// read it from here, not from a copy beside it.
tuner::TuneInput DataLoaderTuneInput(const analyzer::DataLoaderProfile& run) {
  tuner::TuneInput input;
  input.profile = analyzer::DataLoaderModelProfile(run);
  return input;
}

// The plan for the job's planned rank and its keyword arguments. The traced
// knobs go one way, each form made from the one before: the run's recorded
// settings (tuning.run.settings), the model profile's worker group (the
// solver's input), the solver's configuration of it (the plan), and the
// kwargs JSON (DataLoaderKwargs). Nothing reads them back out of the JSON,
// and no configuration of this rank is rebuilt from it (PeersCores sets the
// plan's knobs by name on the other ranks' profiles, for the cores they
// need: a budget, not a form of this rank's settings).
StatusOr<DataLoaderTuneResult> PlanRank(analyzer::JobTuning tuning, const DataLoaderTuneRequest& request) {
  const tuner::TuneInput input = DataLoaderTuneInput(tuning.run);
  const models::Profile& profile = input.profile;
  PIPETUNE_ASSIGN_OR_RETURN(
      tuner::Resources resources,
      tuner::ResolveResources(input, {tuning.run.host.UsableCores(), tuning.run.host.UsableMemoryBytes()},
                              request.budgets));
  const double node_cores = resources.cores;
  if (tuning.ranks_per_node > 1) ShareNode(tuning, resources);
  StatusOr<tuner::Plan> solved = tuner::Solve(input, resources, request.objective);
  if (!solved.ok()) return solved.status();
  tuner::Plan plan = *std::move(solved);
  if (tuning.processes > 1) plan.notes.push_back(JobNote(tuning, resources));
  const Json kwargs = DataLoaderKwargs(profile, *plan.configuration);
  DataLoaderTuneResult result;
  result.changes_settings = models::KnobValues(profile, *plan.configuration) !=
                            models::KnobValues(profile, models::ObservedConfiguration(profile));
  result.kwargs = kwargs;
  if (std::optional<Json> own =
          PerRankSetting(tuning, input, resources, node_cores, request.objective, plan)) {
    result.kwargs["ranks"][std::to_string(*tuning.rank)] = std::move(*own);
  }
  // The DataLoader's one worker group (DataLoaderModelProfile makes one).
  AddStreamNotes(tuning.run, plan.configuration->group_workers.at(0), plan, result.warnings);
  result.dataloader_kwargs = kwargs;
  result.code_change = DataLoaderCodeChange(kwargs);
  result.plan = std::move(plan);
  result.run = std::move(tuning.run);
  result.output = DataLoaderKwargsPath(request.output, request.trace);
  return result;
}

}  // namespace

StatusOr<DataLoaderTuneResult> PlanDataLoaderTrace(const DataLoaderTuneRequest& request) {
  // A job of several processes (docs/distributed.md): one plan for every
  // rank, made for the rank whose input delivers least, within its share
  // of the node. A single process's job is that process.
  PIPETUNE_ASSIGN_OR_RETURN(analyzer::DataLoaderJob job, analyzer::ReadDataLoaderJob({request.trace}));
  PIPETUNE_ASSIGN_OR_RETURN(analyzer::JobTuning tuning, analyzer::JobTuningRun(job));
  return PlanRank(std::move(tuning), request);
}

StatusOr<DataLoaderTuneResult> TuneDataLoaderTrace(const DataLoaderTuneRequest& request) {
  PIPETUNE_ASSIGN_OR_RETURN(DataLoaderTuneResult result, PlanDataLoaderTrace(request));
  PIPETUNE_RETURN_IF_ERROR(WriteFileAtomically(result.output, DumpJson(result.kwargs, 2) + "\n"));
  return result;
}

}  // namespace pipetune::workflow

// The closed tuning loop (verify.h).
#include "pipetune/workflow/verify.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <optional>

#include "handoff_probe.h"
#include "pipetune/tuner/fusion.h"
#include "pipetune/tuner/rewrite.h"
#include "pipetune/workflow/run.h"
#include "run_directory.h"

namespace pipetune::workflow {
namespace {

namespace fs = std::filesystem;

std::string KnobText(const std::optional<int64_t>& value) { return value ? std::to_string(*value) : "-"; }

// "decode.parallelism 1->3, +prefetch, -early_cache": what differs from the original.
std::string Changes(const models::PipelineConfig& original, const models::PipelineConfig& config) {
  std::vector<std::string> parts;
  for (const models::StageConfig& stage : config.stages) {
    std::optional<size_t> index = original.FindStage(stage.name);
    if (!index) {
      parts.push_back(fmt::format("+{}", stage.name));
      continue;
    }
    const models::StageConfig& before = original.stages[*index];
    if (before.parallelism != stage.parallelism) {
      parts.push_back(fmt::format("{} p{}->{}", stage.name, before.parallelism, stage.parallelism));
    }
    if (before.buffer != stage.buffer) {
      parts.push_back(
          fmt::format("{} buffer {}->{}", stage.name, KnobText(before.buffer), KnobText(stage.buffer)));
    }
    if (before.location != stage.location) {
      parts.push_back(fmt::format("{} {}", stage.name, stage.location ? stage.location->ConfigValue() : "-"));
    }
  }
  for (const models::StageConfig& stage : original.stages) {
    if (!config.FindStage(stage.name)) parts.push_back(fmt::format("-{}", stage.name));
  }
  if (parts.empty()) return "as given";
  std::string text;
  for (const std::string& part : parts) text += (text.empty() ? "" : ", ") + part;
  return text;
}

StatusOr<runtime::RunSummary> RunTraced(const models::PipelineConfig& config, const std::string& trace_path,
                                        const VerifyOptions& options) {
  RunConfigOptions run =
      TracedRunOptions(options.seconds, trace_path, options.registry, options.on_run_progress);
  run.base_dir = options.base_dir;
  return RunConfig(config, run);
}

std::optional<double> DemandOf(const models::PipelineConfig& config) {
  if (!config.consumer.step_time_ms || *config.consumer.step_time_ms <= 0) return std::nullopt;
  return 1e3 / *config.consumer.step_time_ms;
}

void Announce(const VerifyOptions& options, int round, const char* what) {
  if (options.on_phase) options.on_phase(Phase{round, options.rounds, what});
}

}  // namespace

int ThreadsOf(const models::PipelineConfig& config) {
  int threads = 0;
  for (const models::StageConfig& stage : config.stages)
    threads += models::OpIsParallel(stage.op) ? stage.parallelism : 1;
  return threads;
}

size_t PickBestRound(const std::vector<RoundScore>& rounds, tuner::Objective objective,
                     std::optional<double> demand) {
  size_t best = 0;
  for (size_t i = 1; i < rounds.size(); ++i) {
    if (rounds[i].measured_throughput > rounds[best].measured_throughput) best = i;
  }
  if (objective != tuner::Objective::kDemand || !demand) return best;
  std::optional<size_t> cheapest;
  for (size_t i = 0; i < rounds.size(); ++i) {
    if (rounds[i].measured_throughput < 0.95 * *demand) continue;
    if (!cheapest || rounds[i].threads < rounds[*cheapest].threads) cheapest = i;
  }
  return cheapest.value_or(best);
}

LoopStep ProgramRoundStep(const tuner::Plan& plan, int threads, bool plan_next, bool changes,
                          double& predicted) {
  LoopStep step{plan.measured_throughput, threads, plan.demand_throughput, false};
  if (plan_next) {
    step.plan_changes_something = changes;
    predicted = plan.predicted_throughput;
  }
  return step;
}

StatusOr<LoopOutcome> RunTuningLoop(
    int rounds, tuner::Objective objective,
    const std::function<StatusOr<LoopStep>(int round, bool plan_next)>& step) {
  if (rounds < 0) return InvalidInput("--rounds must be >= 0");
  LoopOutcome outcome;
  std::vector<RoundScore> scores;
  std::optional<double> demand;
  for (int r = 0;; ++r) {
    bool plan_next = r < rounds;
    PIPETUNE_ASSIGN_OR_RETURN(LoopStep ran, step(r, plan_next));
    scores.push_back({ran.measured_throughput, ran.threads});
    if (ran.demand) demand = ran.demand;
    if (!plan_next) {
      outcome.stop_reason = fmt::format("{} round{} of tuning", rounds, rounds == 1 ? "" : "s");
      break;
    }
    if (!ran.plan_changes_something) {
      outcome.stop_reason = "the plan changed nothing";
      break;
    }
  }
  outcome.rounds_run = scores.size();
  outcome.best = PickBestRound(scores, objective, demand);
  return outcome;
}

StatusOr<VerifyResult> VerifyTune(const models::PipelineConfig& config, const VerifyOptions& options) {
  if (!(options.seconds > 0)) return InvalidInput("--seconds must be > 0");
  if (options.rounds < 0) return InvalidInput("--rounds must be >= 0");
  PIPETUNE_RETURN_IF_ERROR(ValidateGivenHandoff(options.handoff_ns));
  PIPETUNE_RETURN_IF_ERROR(models::Validate(config));
  PIPETUNE_ASSIGN_OR_RETURN(internal::RunDirectory dir,
                            internal::RunDirectory::Make(options.trace_dir, "pipetune-verify"));

  VerifyResult result;
  std::vector<std::string> traces;  // newest first: the newest is profiled, the rest add scaling points
  models::PipelineConfig current = config;
  HandoffCost handoff(options.handoff_ns);
  auto step = [&](int r, bool plan_next) -> StatusOr<LoopStep> {
    Announce(options, r, "running");
    Round round;
    round.index = r;
    round.config = current;
    round.trace_path = dir.File(fmt::format("{}-round{}.ptrace", config.name, r));
    PIPETUNE_ASSIGN_OR_RETURN(runtime::RunSummary summary, RunTraced(current, round.trace_path, options));
    round.run_throughput = summary.throughput;
    round.threads = ThreadsOf(current);
    round.changes = Changes(config, current);
    traces.insert(traces.begin(), round.trace_path);

    Announce(options, r, "tuning");
    PIPETUNE_ASSIGN_OR_RETURN(TracedRun traced, CollectProfile(traces));
    round.measured_throughput = traced.input.profile.measured_throughput;
    if (r > 0) round.predicted_throughput = result.rounds.back().plan.predicted_throughput;
    LoopStep ran{round.measured_throughput, round.threads, DemandOf(config), false};
    if (!plan_next) {
      result.rounds.push_back(std::move(round));
      return ran;
    }
    // The host's hand-off cost, measured once for the loop or given (handoff_probe.h).
    if (traced.input.config) handoff.PriceInto(*traced.input.config, traced.input.profile);
    PIPETUNE_ASSIGN_OR_RETURN(tuner::Resources resources,
                              tuner::ResolveResources(traced.input, traced.Limits(), options.budgets));
    PIPETUNE_ASSIGN_OR_RETURN(tuner::Plan plan, tuner::SolveWithRewrites(traced.input, resources,
                                                                         options.objective, options.solver));
    if (r == 0) round.predicted_throughput = plan.predicted_throughput_before;
    PIPETUNE_ASSIGN_OR_RETURN(models::PipelineConfig next, tuner::ApplyPlan(current, plan));
    // A graph rewrite (fusion.h) makes the earlier traces another pipeline's:
    // their stages no longer match, so they cannot add scaling points.
    if (!plan.rewrites.empty()) traces.clear();
    round.plan = std::move(plan);
    round.has_plan = true;
    result.rounds.push_back(std::move(round));
    ran.plan_changes_something = models::Serialize(next) != models::Serialize(current);
    current = std::move(next);
    return ran;
  };
  PIPETUNE_ASSIGN_OR_RETURN(LoopOutcome outcome, RunTuningLoop(options.rounds, options.objective, step));
  result.best = outcome.best;
  result.stop_reason = outcome.stop_reason;
  if (dir.temporary()) {
    for (Round& round : result.rounds) round.trace_path.clear();
  }
  return result;
}

StatusOr<VerifiedTune> VerifyConfigFile(const std::string& config_path, VerifyOptions options,
                                        const std::string& output, bool with_diff) {
  PIPETUNE_ASSIGN_OR_RETURN(models::PipelineConfig config, models::LoadConfig(config_path));
  options.base_dir = DirectoryOf(config_path);
  PIPETUNE_ASSIGN_OR_RETURN(VerifyResult result, VerifyTune(config, options));
  const Round& best = result.rounds[result.best];
  PIPETUNE_ASSIGN_OR_RETURN(TunedConfig written,
                            WriteTunedConfig(config, best.config, options.base_dir, config_path,
                                             TunedConfigPath(output, config_path, config.name), with_diff));
  return VerifiedTune{std::move(result), std::move(written)};
}

Json VerifyLoopToJson(const std::vector<VerifyRoundRow>& rounds, size_t best,
                      const std::string& stop_reason) {
  Json rows = Json::array();
  for (const VerifyRoundRow& r : rounds) {
    rows.push_back({{"round", r.round},
                    {r.settings_key, r.settings},
                    {"predicted_throughput", r.predicted_throughput},
                    {"measured_throughput", r.measured_throughput},
                    {r.threads_key, r.threads}});
  }
  const VerifyRoundRow& chosen = rounds.at(best);
  Json document = Json::object();
  document["rounds"] = std::move(rows);
  document["best_round"] = chosen.round;
  document["measured_throughput"] = chosen.measured_throughput;
  document["predicted_throughput"] = chosen.predicted_throughput;
  document["stop_reason"] = stop_reason;
  return document;
}

Json VerifiedTuneToJson(const VerifiedTune& verified) {
  const VerifyResult& result = verified.result;
  std::vector<VerifyRoundRow> rounds;
  for (const Round& round : result.rounds) {
    rounds.push_back({round.index, "changes", round.changes, round.predicted_throughput,
                      round.measured_throughput, "threads", round.threads});
  }
  Json document = VerifyLoopToJson(rounds, result.best, result.stop_reason);
  document["config_path"] = verified.written.path;
  if (verified.written.diff) document["diff"] = *verified.written.diff;
  return document;
}

std::string FormatRoundTable(const VerifyResult& result) {
  std::string text = fmt::format("{:<7} {:>11} {:>11} {:>9} {:>8}  {}\n", "round", "predicted", "measured",
                                 "meas/pred", "threads", "config");
  for (const Round& round : result.rounds) {
    std::string ratio = round.predicted_throughput > 0
                            ? fmt::format("{:.2f}", round.measured_throughput / round.predicted_throughput)
                            : "-";
    text += fmt::format(
        "{:<7} {:>11} {:>11} {:>9} {:>8}  {}\n",
        fmt::format("{}{}", round.index, round.index == static_cast<int>(result.best) ? " *" : ""),
        fmt::format("{:.4g}/s", round.predicted_throughput),
        fmt::format("{:.4g}/s", round.measured_throughput), ratio, round.threads, round.changes);
  }
  const Round& best = result.rounds[result.best];
  const Round& first = result.rounds.front();
  text += fmt::format("best: round {} at {:.4g}/s measured", best.index, best.measured_throughput);
  if (first.measured_throughput > 0 && best.index != first.index) {
    text += fmt::format(" (x{:.2f} over the config as given)",
                        best.measured_throughput / first.measured_throughput);
  }
  text += fmt::format("; stopped after {}\n", result.stop_reason);
  return text;
}

}  // namespace pipetune::workflow

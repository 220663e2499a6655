// tf.data's tune and its tuning loop (tfdata_verify.h): the trace solved as
// a config's run and written as a plan keyed by call site; each round of
// the one loop (RunTuningLoop, verify.h) applies the plan the round before
// it made.
#include "pipetune/workflow/tfdata_verify.h"

#include <fmt/format.h>

#include "pipetune/base/files.h"
#include "pipetune/tuner/plan_report.h"
#include "pipetune/tuner/rewrite.h"
#include "pipetune/workflow/tfdata.h"
#include "pipetune/workflow/verify.h"

namespace pipetune::workflow {
namespace {

// The worker threads a round's trace ran with: each map's parallelism, one
// for every other stage (verify.cc counts a config's alike).
int ThreadsOf(const std::string& trace) {
  StatusOr<TracedRun> traced = CollectProfile({trace});
  if (!traced.ok()) return 0;
  int threads = 0;
  for (const models::StageProfile& stage : traced->input.profile.stages) threads += stage.parallelism;
  return threads;
}

}  // namespace

StatusOr<TuneResult> TuneTfDataTrace(const TuneRequest& request) {
  if (!request.source.empty())
    return InvalidInput(
        fmt::format("--source {}: {} is a tf.data script's trace; its plan goes to the script's calls "
                    "(--apply), not to a "
                    "C++ source",
                    request.source, request.traces[0]));
  PIPETUNE_ASSIGN_OR_RETURN(SolvedTrace solved, SolveTrace(request, /*graph_rewrites=*/false));
  const std::optional<models::PipelineConfig>& traced = solved.traced.input.config;
  if (!traced)
    return InvalidInput(fmt::format("{}: the tf.data trace holds no config of its ops", request.traces[0]));
  TuneResult result;
  result.plan = std::move(solved.plan);
  PIPETUNE_ASSIGN_OR_RETURN(models::PipelineConfig tuned, tuner::ApplyPlan(*traced, result.plan));
  PIPETUNE_ASSIGN_OR_RETURN(TfDataPlan plan, TfDataPlanFrom(*traced, tuned));
  plan.output = TfDataPlanPath(request.output, request.traces[0]);
  Json document = TfDataPlanToJson(plan);
  document["predicted_throughput"] = result.plan.predicted_throughput;
  document["disk_cache_hint"] = tuner::DiskCacheHintToJson(result.plan.disk_cache_hint);
  PIPETUNE_RETURN_IF_ERROR(WriteFileAtomically(plan.output, DumpJson(document, 2) + "\n"));
  result.written["output"] = plan.output;
  result.written[kTfDataPlanKey] = TfDataPlanToJson(plan)[kTfDataPlanKey];
  result.written_text =
      fmt::format("\ntf.data plan: {} (pipetune profile --apply {} -- python3 ...)\ncode change:\n",
                  plan.output, plan.output);
  for (const std::string& line : plan.code_change) result.written_text += "  " + line + "\n";
  if (plan.code_change.empty()) result.written_text += "  (none: the script as written is the plan)\n";
  result.tfdata = std::move(plan);
  return result;
}

StatusOr<TfDataVerifyResult> VerifyTfData(const DataLoaderVerifyOptions& options) {
  TfDataVerifyResult result;
  std::string plan_path;  // the plan the next round applies
  double predicted = 0;
  auto step = [&](int round, bool plan_next) -> StatusOr<LoopStep> {
    TfDataRound r;
    r.index = round;
    r.trace = DataLoaderRoundTrace(options.trace, round);
    r.plan = round == 0 ? std::string() : plan_path;
    r.predicted_throughput = predicted;
    PIPETUNE_RETURN_IF_ERROR(
        RunProgramRound(options, r.trace, round, [&] { return TfDataPlanSettings(plan_path); }).status());
    if (!IsTfDataTraceFile(r.trace))
      return InvalidInput(fmt::format("round {}: {} is not a tf.data trace", round, r.trace));
    TuneRequest request;
    request.traces = {r.trace};
    request.budgets = options.budgets;
    request.objective = options.objective;
    request.output = TfDataPlanPath("", r.trace);
    StatusOr<TuneResult> tuned = TuneTfDataTrace(request);
    if (!tuned.ok()) return tuned.status().WithContext(fmt::format("round {}", round));
    r.measured_throughput = tuned->plan.measured_throughput;
    r.threads = ThreadsOf(r.trace);
    r.code_change = tuned->tfdata->code_change;
    result.rounds.push_back(r);
    if (plan_next) plan_path = tuned->tfdata->output;
    return ProgramRoundStep(tuned->plan, r.threads, plan_next, !tuned->tfdata->code_change.empty(),
                            predicted);
  };
  PIPETUNE_ASSIGN_OR_RETURN(LoopOutcome outcome, RunTuningLoop(options.rounds, options.objective, step));
  result.best = outcome.best;
  result.stop_reason = outcome.stop_reason;
  // The best round's settings: round 0's is the script as written (an empty
  // plan), a later one's the plan it applied.
  const TfDataRound& best = result.rounds[result.best];
  result.output = TfDataPlanPath(options.output, options.trace);
  TfDataPlan kept;
  if (!best.plan.empty()) {
    PIPETUNE_ASSIGN_OR_RETURN(Json plan, ReadTfDataPlan(best.plan));
    kept.sites = plan[kTfDataPlanKey]["sites"];
    const Json& options = plan[kTfDataPlanKey].value("options", Json::object());
    kept.autotune_off = options.value("autotune", true) == false;
    kept.code_change = plan[kTfDataPlanKey].value("code_change", std::vector<std::string>());
  }
  result.code_change = kept.code_change;
  PIPETUNE_RETURN_IF_ERROR(WriteFileAtomically(result.output, DumpJson(TfDataPlanToJson(kept), 2) + "\n"));
  return result;
}

std::string FormatTfDataVerify(const TfDataVerifyResult& result) {
  std::string out = fmt::format("{:<6} {:<44} {:>12} {:>12} {:>8}\n", "round", "plan", "measured/s",
                                "predicted", "threads");
  for (const TfDataRound& r : result.rounds) {
    out += fmt::format("{:<6} {:<44} {:>12.2f} {:>12} {:>8}{}\n", r.index,
                       r.plan.empty() ? std::string("the script as written") : r.plan, r.measured_throughput,
                       r.index == 0 ? std::string("-") : fmt::format("{:.2f}", r.predicted_throughput),
                       r.threads, &r == &result.rounds[result.best] ? "  <- best" : "");
  }
  out += fmt::format("stopped: {}\ntf.data plan (round {}): {}\ncode change:\n", result.stop_reason,
                     result.rounds[result.best].index, result.output);
  for (const std::string& line : result.code_change) out += "  " + line + "\n";
  if (result.code_change.empty()) out += "  (none: the script as written measured best)\n";
  return out;
}

Json TfDataVerifyToJson(const TfDataVerifyResult& result) {
  std::vector<VerifyRoundRow> rows;
  for (const TfDataRound& r : result.rounds) {
    rows.push_back({r.index, "plan", r.plan.empty() ? Json(nullptr) : Json(r.plan), r.predicted_throughput,
                    r.measured_throughput, "threads", r.threads});
  }
  Json document = VerifyLoopToJson(rows, result.best, result.stop_reason);
  // Each round's code change: what the plan its trace made would change.
  for (size_t i = 0; i < result.rounds.size(); ++i) {
    document["rounds"][i]["code_change"] = result.rounds[i].code_change;
  }
  document["output"] = result.output;
  document["code_change"] = result.code_change;
  return document;
}

}  // namespace pipetune::workflow

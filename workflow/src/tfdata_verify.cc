// `pipetune tune TRACE --verify -- python3 SCRIPT` when the script is a
// tf.data one (tfdata.h): the one tuning loop (RunTuningLoop, verify.h)
// with a tf.data plan applied each round, and the one place that tells a
// tf.data script from a DataLoader's: its first run's trace.
#include "pipetune/workflow/tfdata_verify.h"

#include <fmt/format.h>

#include "pipetune/base/files.h"
#include "pipetune/workflow/profile_program.h"
#include "pipetune/workflow/tfdata.h"
#include "pipetune/workflow/tune.h"
#include "pipetune/workflow/verify.h"

namespace pipetune::workflow {
namespace {

// Runs the program once under the bootstrap, with `plan` applied (empty:
// as written), into `trace`.
Status RunRound(const DataLoaderVerifyOptions& options, const std::string& plan, const std::string& trace,
                int round) {
  PIPETUNE_ASSIGN_OR_RETURN(PythonEnvironment env, PythonBootstrapEnvironment(plan));
  if (!env.warning.empty()) return InvalidInput(env.warning);
  ProfileOptions profile;
  profile.trace_path = trace;
  profile.interval_ms = options.interval_ms;
  profile.command = options.command;
  profile.environment = env.variables;
  profile.stdout_to_stderr = options.program_stdout_to_stderr;
  PIPETUNE_ASSIGN_OR_RETURN(ProfiledProgram ran, ProfileProgram(profile));
  if (ran.exit_code != 0) {
    return Failed(
        fmt::format("round {}: {} exited with status {}", round, options.command[0], ran.exit_code));
  }
  return Status::Ok();
}

// The worker threads a round's trace ran with: each map's parallelism, one
// for every other stage (verify.cc counts a config's alike).
int ThreadsOf(const std::string& trace) {
  StatusOr<TracedRun> traced = CollectProfile({trace});
  if (!traced.ok()) return 0;
  int threads = 0;
  for (const models::StageProfile& stage : traced->input.profile.stages) threads += stage.parallelism;
  return threads;
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
    if (round > 0) PIPETUNE_RETURN_IF_ERROR(RunRound(options, plan_path, r.trace, round));
    TuneRequest request;
    request.traces = {r.trace};
    request.budgets = options.budgets;
    request.objective = options.objective;
    request.output = TfDataPlanPath("", r.trace);
    StatusOr<TuneResult> tuned = Tune(request);
    if (!tuned.ok()) return tuned.status().WithContext(fmt::format("round {}", round));
    if (!tuned->tfdata)
      return InvalidInput(fmt::format("round {}: {} is not a tf.data trace", round, r.trace));
    r.measured_throughput = tuned->plan.measured_throughput;
    r.threads = ThreadsOf(r.trace);
    r.code_change = tuned->tfdata->code_change;
    result.rounds.push_back(r);
    LoopStep ran{r.measured_throughput, r.threads, tuned->plan.demand_throughput, false};
    if (plan_next) {
      ran.plan_changes_something = !tuned->tfdata->code_change.empty();
      plan_path = tuned->tfdata->output;
      predicted = tuned->plan.predicted_throughput;
    }
    return ran;
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
    kept.code_change = plan[kTfDataPlanKey].value("code_change", std::vector<std::string>());
  }
  result.code_change = kept.code_change;
  PIPETUNE_RETURN_IF_ERROR(WriteFileAtomically(result.output, DumpJson(TfDataPlanToJson(kept), 2) + "\n"));
  return result;
}

}  // namespace

StatusOr<PythonVerifyResult> VerifyPythonProgram(DataLoaderVerifyOptions options) {
  if (options.command.empty())
    return InvalidInput("--verify: no program: pipetune tune --verify -- COMMAND ...");
  // Round 0, the script as written, tells which kind it is.
  PIPETUNE_RETURN_IF_ERROR(RunRound(options, "", options.trace, 0));
  PythonVerifyResult result;
  if (IsTfDataTraceFile(options.trace)) {
    PIPETUNE_ASSIGN_OR_RETURN(result.tfdata, VerifyTfData(options));
    return result;
  }
  options.first_round_ran = true;
  PIPETUNE_ASSIGN_OR_RETURN(result.dataloader, VerifyDataLoader(options));
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
  Json rounds = Json::array();
  for (const TfDataRound& r : result.rounds) {
    rounds.push_back({{"round", r.index},
                      {"plan", r.plan.empty() ? Json(nullptr) : Json(r.plan)},
                      {"predicted_throughput", r.predicted_throughput},
                      {"measured_throughput", r.measured_throughput},
                      {"threads", r.threads},
                      {"code_change", r.code_change}});
  }
  Json document = VerifyLoopToJson(std::move(rounds), result.best, result.stop_reason);
  document["output"] = result.output;
  document["code_change"] = result.code_change;
  return document;
}

}  // namespace pipetune::workflow

// `pipetune tune TRACE --verify -- COMMAND` for a DataLoader (dataloader_verify.h):
// each round run under the bootstrap, measured and planned, in the one
// tuning loop (verify.h).
#include "pipetune/workflow/dataloader_verify.h"

#include <fmt/format.h>

#include <filesystem>
#include <functional>
#include <optional>

#include "pipetune/analyzer/dataloader_model.h"
#include "pipetune/analyzer/dataloader_trace.h"
#include "pipetune/base/files.h"
#include "pipetune/base/json.h"
#include "pipetune/workflow/dataloader_kwargs.h"
#include "pipetune/workflow/dataloader_plan.h"
#include "pipetune/workflow/profile_program.h"
#include "pipetune/workflow/python_bootstrap.h"
#include "pipetune/workflow/verify.h"

namespace pipetune::workflow {
namespace fs = std::filesystem;

std::string DataLoaderRoundTrace(const std::string& trace, int round) {
  if (round == 0) return trace;
  fs::path p(trace);
  return (p.parent_path() / fmt::format("{}-round-{}{}", p.stem().string(), round, p.extension().string()))
      .string();
}

StatusOr<int> RunProgramRound(const DataLoaderVerifyOptions& options, const std::string& trace, int round,
                              const std::function<StatusOr<ProgramSettings>()>& settings_of) {
  if (round == 0 && options.first_round_ran) return 0;
  std::optional<ProgramSettings> apply;
  if (round > 0) {
    PIPETUNE_ASSIGN_OR_RETURN(apply, settings_of());
  }
  ProfileOptions profile_options;
  profile_options.trace_path = trace;
  profile_options.interval_ms = options.interval_ms;
  profile_options.command = options.command;
  profile_options.stdout_to_stderr = options.program_stdout_to_stderr;
  PIPETUNE_ASSIGN_OR_RETURN(ProfiledProgram ran, ProfileUnderBootstrap(profile_options, apply));
  if (ran.exit_code != 0) {
    return Failed(
        fmt::format("round {}: {} exited with status {}", round, options.command[0], ran.exit_code));
  }
  return ran.exit_code;
}

StatusOr<DataLoaderVerifyResult> VerifyDataLoader(const DataLoaderVerifyOptions& options) {
  if (options.command.empty())
    return InvalidInput("--verify: no program: pipetune tune --verify -- COMMAND ...");
  DataLoaderVerifyResult result;
  std::string kwargs_path;
  Json applied;  // null: the script's own settings
  double predicted = 0;
  auto step = [&](int round, bool plan_next) -> StatusOr<LoopStep> {
    DataLoaderRound r;
    r.index = round;
    r.applied = applied;
    r.predicted_batches_per_second = predicted;
    r.trace = DataLoaderRoundTrace(options.trace, round);
    PIPETUNE_ASSIGN_OR_RETURN(r.exit_code, RunProgramRound(options, r.trace, round, [&] {
                                return DataLoaderSettingsFile(kwargs_path);
                              }));
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
    if (plan_next) {
      kwargs_path = tuned->output;
      applied = tuned->dataloader_kwargs;
    }
    return ProgramRoundStep(tuned->plan, 1 + r.workers, plan_next, tuned->changes_settings, predicted);
  };
  PIPETUNE_ASSIGN_OR_RETURN(LoopOutcome outcome, RunTuningLoop(options.rounds, options.objective, step));
  result.best = outcome.best;
  result.stop_reason = outcome.stop_reason;
  const DataLoaderRound& best = result.rounds[result.best];
  if (!best.applied.is_null()) {
    result.kwargs = best.applied;
  } else {
    // The script's own settings measured best: write them, so that applying
    // the file changes nothing.
    StatusOr<analyzer::DataLoaderProfile> profile = analyzer::ReadDataLoaderProfile(best.trace);
    if (!profile.ok()) return profile.status();
    models::Profile model = analyzer::DataLoaderModelProfile(*profile);
    result.kwargs = DataLoaderKwargs(model, models::ObservedConfiguration(model));
  }
  result.output = DataLoaderKwargsPath(options.output, options.trace);
  PIPETUNE_RETURN_IF_ERROR(WriteFileAtomically(result.output, DumpJson(result.kwargs, 2) + "\n"));
  result.code_change = DataLoaderCodeChange(result.kwargs);
  return result;
}

}  // namespace pipetune::workflow

// `pipetune tune TRACE...`: profile + budgets -> plan -> tuned config.
// `pipetune tune CONFIG --verify`: the closed loop (pipetune/workflow/verify.h).
#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "cli_common.h"
#include "commands.h"
#include "pipetune/base/json.h"
#include "pipetune/tuner/plan_report.h"
#include "pipetune/workflow/dataloader.h"
#include "pipetune/workflow/engine_from_dataloader.h"
#include "pipetune/workflow/tfdata_verify.h"
#include "pipetune/workflow/tune.h"
#include "pipetune/workflow/verify.h"
#include "run_report.h"

namespace pipetune::cli {
namespace {

struct TuneFlags {
  std::vector<std::string> inputs;
  std::optional<double> cores;
  std::string memory;
  std::optional<int> max_threads;
  std::string cache_dir;
  bool no_cache = false;
  std::string objective = "max";
  std::string output;
  std::string format = "text";
  bool diff = false;
  bool verify = false;
  bool engine = false;  // a DataLoader's trace: the engine's equivalent config, tuned
  double seconds = 3;
  std::optional<int> rounds;  // --verify: 3 for a config, 1 for a DataLoader
  std::string trace_dir;
  std::string progress = "auto";
  std::string source;                // --source: the C++ file building the pipeline, rewritten in place
  std::string source_build_dir;      // --source-build-dir: its compile_commands.json
  std::vector<std::string> command;  // after --: a Python program (--verify of a DataLoader)
  std::optional<double> handoff_ns;  // --handoff-ns: in place of the hand-off probe
};

StatusOr<tuner::BudgetFlags> BudgetsFrom(const TuneFlags& flags) {
  StatusOr<tuner::BudgetFlags> budgets =
      workflow::ParseBudgets(flags.cores, flags.memory, flags.max_threads, flags.cache_dir);
  if (budgets.ok()) budgets->no_cache = flags.no_cache;
  return budgets;
}

tuner::Objective ObjectiveFrom(const TuneFlags& flags) {
  return flags.objective == "demand" ? tuner::Objective::kDemand : tuner::Objective::kMax;
}

// --engine: the engine config that replaces a DataLoader (docs/pytorch.md,
// "The engine in place of the DataLoader").
int TuneEngine(const TuneFlags& flags, const tuner::BudgetFlags& budgets) {
  workflow::EngineTuneRequest request;
  request.traces = flags.inputs;
  request.budgets = budgets;
  request.objective = ObjectiveFrom(flags);
  request.output = flags.output;
  request.calibration_seconds = flags.seconds;
  StatusOr<workflow::EngineTuneResult> result = workflow::TuneEngineFromDataLoader(request);
  if (!result.ok()) return ReportError(result.status());
  if (flags.format == "json") {
    fmt::print("{}\n", DumpJson(workflow::EngineTuneToJson(*result), 2));
  } else {
    fmt::print("{}", workflow::FormatEngineTune(*result));
  }
  return kExitOk;
}

// Traces of a config's run, a program's or a DataLoader's: which, the
// workflow decides (pipetune/workflow/recording.h).
int TuneTraces(const TuneFlags& flags) {
  StatusOr<tuner::BudgetFlags> budgets = BudgetsFrom(flags);
  if (!budgets.ok()) return ReportError(budgets.status());
  if (flags.engine) return TuneEngine(flags, *budgets);
  workflow::TuneRequest request;
  request.traces = flags.inputs;
  request.budgets = *budgets;
  request.objective = ObjectiveFrom(flags);
  request.output = flags.output;
  request.diff = flags.diff;
  request.graph_rewrites = flags.source.empty();  // a C++ source takes knobs only
  request.source = flags.source;
  request.source_build_dir = flags.source_build_dir;
  request.handoff_ns = flags.handoff_ns;
  StatusOr<workflow::TuneResult> result = workflow::Tune(request);
  if (!result.ok()) return ReportError(result.status());
  for (const std::string& warning : result->warnings) fmt::print(stderr, "pipetune: WARNING: {}\n", warning);
  if (flags.format == "json") {
    fmt::print("{}\n", DumpJson(workflow::TuneResultToJson(*result), 2));
    if (result->source) fmt::print(stderr, "{}", result->source->output);
    return kExitOk;
  }
  fmt::print("{}", workflow::FormatTuneResult(*result, flags.source));
  return kExitOk;
}

// `pipetune tune TRACE --verify -- python3 train.py`: the DataLoader loop.
int TuneVerifyDataLoader(const TuneFlags& flags) {
  StatusOr<tuner::BudgetFlags> budgets = BudgetsFrom(flags);
  if (!budgets.ok()) return ReportError(budgets.status());
  workflow::DataLoaderVerifyOptions options;
  options.trace = flags.inputs[0];
  // CLI11 gives what follows -- to the first positional that takes more.
  options.command = flags.command;
  options.command.insert(options.command.begin(), flags.inputs.begin() + 1, flags.inputs.end());
  options.budgets = *budgets;
  options.output = flags.output;
  options.rounds = std::max(1, flags.rounds.value_or(1));
  options.objective = ObjectiveFrom(flags);
  options.program_stdout_to_stderr = flags.format == "json";
  // A DataLoader's script or a tf.data one: its first run tells (tfdata_verify.h).
  StatusOr<workflow::PythonVerifyResult> result = workflow::VerifyPythonProgram(options);
  if (!result.ok()) return ReportError(result.status());
  if (result->tfdata) {
    if (flags.format == "json") {
      fmt::print("{}\n", DumpJson(workflow::TfDataVerifyToJson(*result->tfdata), 2));
    } else {
      fmt::print("{}", workflow::FormatTfDataVerify(*result->tfdata));
    }
    return kExitOk;
  }
  if (flags.format == "json") {
    fmt::print("{}\n", DumpJson(workflow::DataLoaderVerifyToJson(*result->dataloader), 2));
    return kExitOk;
  }
  fmt::print("{}", workflow::FormatDataLoaderVerify(*result->dataloader));
  return kExitOk;
}

int TuneVerify(const TuneFlags& flags) {
  if (!flags.command.empty() || flags.inputs.size() >= 2) return TuneVerifyDataLoader(flags);
  if (flags.inputs.size() != 1) return ReportError(InvalidInput("--verify takes one pipeline config"));
  StatusOr<tuner::BudgetFlags> budgets = BudgetsFrom(flags);
  if (!budgets.ok()) return ReportError(budgets.status());

  bool show_progress = flags.progress == "always" || (flags.progress == "auto" && StderrIsTerminal());
  auto phase = std::make_shared<workflow::Phase>();
  workflow::VerifyOptions options;
  options.seconds = flags.seconds;
  options.rounds = flags.rounds.value_or(3);
  options.objective = ObjectiveFrom(flags);
  options.budgets = *budgets;
  options.trace_dir = flags.trace_dir;
  options.handoff_ns = flags.handoff_ns;
  if (show_progress) {
    options.on_phase = [phase](const workflow::Phase& p) {
      *phase = p;
      fmt::print(stderr, "\r\033[Kround {}/{}: {}", p.round, p.rounds, p.what);
      std::fflush(stderr);
    };
    options.on_run_progress = [phase](const runtime::Progress& p) {
      fmt::print(stderr, "\r\033[Kround {}/{}: {}", phase->round, phase->rounds, FormatProgress(p));
      std::fflush(stderr);
    };
  }
  StatusOr<workflow::VerifiedTune> verified =
      workflow::VerifyConfigFile(flags.inputs[0], options, flags.output, flags.diff);
  if (show_progress) fmt::print(stderr, "\r\033[K");
  if (!verified.ok()) return ReportError(verified.status());
  if (flags.format == "json") {
    fmt::print("{}\n", DumpJson(workflow::VerifiedTuneToJson(*verified), 2));
    return kExitOk;
  }
  const workflow::VerifyResult& result = verified->result;
  const workflow::Round& last = result.rounds.back();
  if (last.has_plan) fmt::print("{}\n", tuner::FormatPlanText(last.plan));
  fmt::print("{}", workflow::FormatRoundTable(result));
  fmt::print("{}", workflow::FormatDiff(verified->written));
  fmt::print("tuned config (round {}): {}\n", result.rounds[result.best].index, verified->written.path);
  return kExitOk;
}

}  // namespace

void RegisterTuneCommand(CLI::App& app, int& exit_code) {
  auto flags = std::make_shared<TuneFlags>();
  CLI::App* sub = app.add_subcommand(
      "tune",
      "Solve for parallelism, prefetch and cache under the CPU and memory budgets; write the tuned config");
  sub->add_option(
         "input", flags->inputs,
         "Trace of a run (more traces of the same pipeline add scaling points); with --verify: a config, "
         "or TRACE -- python3 SCRIPT ... (a PyTorch DataLoader)")
      // Not required, so that a bare `tune` is answered in the callback with what the input may be; CLI11
      // then refuses two unbounded positionals, and no one passes a million traces.
      ->expected(0, 1 << 20);
  sub->add_option("--cores", flags->cores,
                  "Core budget (default: the config's resources, else the traced host)")
      ->check(Positive("cores"));
  sub->add_option(
      "--memory", flags->memory,
      "Memory budget for buffers and caches, e.g. 4GiB (default: the config's resources, else 90% of "
      "the traced host's available memory)");
  sub->add_option("--max-threads", flags->max_threads, "Threads of all stages together (default 256)")
      ->check(Positive("threads", /*whole=*/true));
  sub->add_option("--cache-dir", flags->cache_dir, "Allow a cache on disk, in this directory");
  sub->add_flag("--no-cache", flags->no_cache,
                "Place no cache (the data changes between epochs, or the stages themselves are measured)");
  sub->add_option("--objective", flags->objective,
                  "max: the highest throughput; demand: the consumer's rate with the fewest cores")
      ->check(CLI::IsMember({"max", "demand"}));
  sub->add_option("-o,--output", flags->output,
                  "Tuned config to write (default: beside the traced config as NAME.tuned.json; relative "
                  "paths in it are rewritten to name the same files)");
  sub->add_option("--format", flags->format, "Plan output: text or json")
      ->check(CLI::IsMember({"text", "json"}));
  sub->add_flag("--diff", flags->diff, "Show the change to the config as a unified diff");
  sub->add_option(
      "--source", flags->source,
      "Also set the plan's knobs in this C++ file building the pipeline (pipetune-rewrite apply -i)");
  sub->add_option(
      "--source-build-dir", flags->source_build_dir,
      "--source: the build directory with compile_commands.json (default: the one pipetune-rewrite sits in)");
  sub->add_flag(
      "--verify", flags->verify,
      "INPUT is a config: run it traced, tune, run the plan, refit, re-plan; keep the best measured");
  sub->add_flag(
      "--engine", flags->engine,
      "INPUT is a DataLoader's trace: write the engine config that reads the same files with the same "
      "transforms, calibrated on them and tuned (-o: where; default TRACE's stem + .engine.json)");
  sub->add_option("--seconds", flags->seconds,
                  "--verify: seconds per measured run; --engine: seconds of the calibration run (default 3)")
      ->check(Positive("seconds"));
  sub->add_option("--rounds", flags->rounds,
                  "--verify: plans to run after the first run (default 3 for a config, 1 for a DataLoader)")
      ->check(NonNegative("rounds", /*whole=*/true));
  sub->add_option("--trace-dir", flags->trace_dir, "--verify: keep each round's trace in this directory");
  sub->add_option("--handoff-ns", flags->handoff_ns,
                  "CPU nanoseconds an element's hand-off between two stages costs, used to price fusing "
                  "adjacent maps in place of measuring it on this host (the plan says which it used): the "
                  "same plan from run to run")
      ->check(NonNegative("nanoseconds"));
  sub->add_option("--progress", flags->progress,
                  "Live progress on stderr: auto (on a terminal), always, never")
      ->check(CLI::IsMember({"auto", "always", "never"}));
  // `tune TRACE --verify -- python3 train.py ...`: what follows -- is the program.
  sub->add_option("program", flags->command,
                  "--verify of a PyTorch DataLoader: after --, the Python program and its arguments");
  sub->callback([flags, &exit_code] {
    if (flags->inputs.empty() && flags->command.empty()) {
      exit_code = ReportError(MissingInput("tune",
                                           "a trace (or several of one pipeline), a pipeline config with "
                                           "--verify, or TRACE --verify -- PROGRAM",
                                           "pipetune tune run.trace --cores 8"));
      return;
    }
    if (!flags->command.empty() && !flags->verify) {
      exit_code = ReportError(InvalidInput("unexpected arguments after the trace: " + flags->command[0] +
                                           " (a program to run needs --verify)"));
      return;
    }
    if (flags->engine && flags->verify) {
      exit_code = ReportError(InvalidInput("--engine and --verify: give one"));
      return;
    }
    exit_code = flags->verify ? TuneVerify(*flags) : TuneTraces(*flags);
  });
}

}  // namespace pipetune::cli

// `pipetune tune TRACE...`: profile + budgets -> plan -> tuned config.
// `pipetune tune CONFIG --verify`: the closed loop (pipetune/verify).
#include <fmt/format.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "cli_common.h"
#include "commands.h"
#include "pipetune/models/config.h"
#include "pipetune/tuner/plan_report.h"
#include "pipetune/tuner/rewrite.h"
#include "pipetune/tuner/solver.h"
#include "pipetune/tuner/tune_input.h"
#include "pipetune/verify/verify.h"
#include "run_report.h"

namespace pipetune::cli {
namespace {

namespace fs = std::filesystem;

struct TuneFlags {
  std::vector<std::string> inputs;
  std::optional<double> cores;
  std::string memory;
  std::optional<int> max_threads;
  std::string cache_dir;
  std::string objective = "max";
  std::string output;
  std::string format = "text";
  bool diff = false;
  bool verify = false;
  double seconds = 3;
  int rounds = 3;
  std::string trace_dir;
  std::string progress = "auto";
};

bool LooksLikeJson(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  char c = 0;
  while (in.get(c)) {
    if (c != ' ' && c != '\n' && c != '\r' && c != '\t') return c == '{';
  }
  return false;
}

StatusOr<tuner::BudgetFlags> BudgetsFrom(const TuneFlags& flags) {
  tuner::BudgetFlags budgets;
  budgets.cores = flags.cores;
  if (!flags.memory.empty()) {
    StatusOr<uint64_t> bytes = models::ParseSize(flags.memory);
    if (!bytes.ok()) return bytes.status().WithContext("--memory");
    if (*bytes == 0) return InvalidInput("--memory: must be > 0");
    budgets.memory_bytes = *bytes;
  }
  budgets.max_threads = flags.max_threads;
  if (!flags.cache_dir.empty()) {
    budgets.disk_cache_dir = flags.cache_dir;
    // The space where the directory is, or would be created.
    fs::path probe = flags.cache_dir;
    std::error_code error;
    while (!probe.empty() && !fs::exists(probe, error)) probe = probe.parent_path();
    fs::space_info space = fs::space(probe.empty() ? fs::path(".") : probe, error);
    if (!error) budgets.disk_free_bytes = space.available;
  }
  return budgets;
}

tuner::Objective ObjectiveFrom(const TuneFlags& flags) {
  return flags.objective == "demand" ? tuner::Objective::kDemand : tuner::Objective::kMax;
}

// "dir/x.json" -> "dir/x.tuned.json".
std::string DefaultTunedPath(const std::string& config_path) {
  fs::path path = config_path;
  return (path.parent_path() / (path.stem().string() + ".tuned.json")).string();
}

// Writes the tuned config and, with --diff, prints what changed.
Status WriteTuned(const models::PipelineConfig& original, const models::PipelineConfig& tuned,
                  const std::string& path, bool diff, std::FILE* out) {
  PIPETUNE_RETURN_IF_ERROR(models::SaveConfig(tuned, path));
  if (diff) {
    std::string text = tuner::UnifiedDiff(models::Serialize(original), models::Serialize(tuned),
                                          "a/" + original.name + ".json (as traced)", "b/" + path);
    fmt::print(out, "{}", text.empty() ? "(no change)\n" : text);
  }
  return Status::Ok();
}

int TuneTraces(const TuneFlags& flags) {
  if (LooksLikeJson(flags.inputs[0])) {
    return ReportError(
        InvalidInput(fmt::format("{} is a pipeline config, not a trace: trace a run first (pipetune run {} "
                                 "--trace run.ptrace), or add "
                                 "--verify to run and tune it in one go",
                                 flags.inputs[0], flags.inputs[0])));
  }
  StatusOr<tuner::TracedRun> traced = tuner::LoadTracedRun(flags.inputs);
  if (!traced.ok()) return ReportError(traced.status());
  StatusOr<tuner::BudgetFlags> budgets = BudgetsFrom(flags);
  if (!budgets.ok()) return ReportError(budgets.status());
  StatusOr<tuner::Resources> resources = tuner::ResolveResources(traced->input, traced->host, *budgets);
  if (!resources.ok()) return ReportError(resources.status());
  StatusOr<tuner::Plan> plan = tuner::Solve(traced->input, *resources, ObjectiveFrom(flags));
  if (!plan.ok()) return ReportError(plan.status());

  const std::optional<models::PipelineConfig>& config = traced->input.config;
  std::string output = flags.output;
  if (config && output.empty()) {
    // Beside the config the run read when the trace says where that was;
    // otherwise in the current directory.
    output = traced->config_path.empty() ? config->name + ".tuned.json" : DefaultTunedPath(traced->config_path);
  }
  if (!config && !flags.output.empty()) {
    return ReportError(
        InvalidInput(fmt::format("{} holds no pipeline config (a program traced with `pipetune profile`): "
                                 "there is nothing to rewrite; "
                                 "drop -o to see the plan",
                                 flags.inputs[0])));
  }
  bool json = flags.format == "json";
  std::optional<models::PipelineConfig> tuned;
  if (config) {
    StatusOr<models::PipelineConfig> applied = tuner::ApplyPlan(*config, *plan);
    if (!applied.ok()) return ReportError(applied.status());
    tuned = std::move(*applied);
    if (!traced->config_path.empty()) {
      models::RebaseRelativePaths(*tuned, DirectoryOf(traced->config_path), DirectoryOf(output));
    }
  }
  if (json) {
    models::Json document = tuner::PlanToJson(*plan);
    document["config_path"] = tuned ? models::Json(output) : models::Json(nullptr);
    if (tuned) {
      Status written = models::SaveConfig(*tuned, output);
      if (!written.ok()) return ReportError(written);
      if (flags.diff) {
        document["diff"] = tuner::UnifiedDiff(models::Serialize(*config), models::Serialize(*tuned),
                                              "a/" + config->name + ".json (as traced)", "b/" + output);
      }
    }
    fmt::print("{}\n", document.dump(2));
    return kExitOk;
  }
  fmt::print("{}", tuner::FormatPlanText(*plan));
  if (!tuned) {
    fmt::print("\nthe trace holds no pipeline config: nothing to rewrite\n");
    return kExitOk;
  }
  fmt::print("\n");
  Status written = WriteTuned(*config, *tuned, output, flags.diff, stdout);
  if (!written.ok()) return ReportError(written);
  fmt::print("tuned config: {}\n", output);
  return kExitOk;
}


int TuneVerify(const TuneFlags& flags) {
  if (flags.inputs.size() != 1) return ReportError(InvalidInput("--verify takes one pipeline config"));
  const std::string& config_path = flags.inputs[0];
  StatusOr<models::PipelineConfig> config = models::LoadConfig(config_path);
  if (!config.ok()) return ReportError(config.status());
  StatusOr<tuner::BudgetFlags> budgets = BudgetsFrom(flags);
  if (!budgets.ok()) return ReportError(budgets.status());

  bool show_progress = flags.progress == "always" || (flags.progress == "auto" && StderrIsTerminal());
  auto phase = std::make_shared<verify::Phase>();
  verify::VerifyOptions options;
  options.seconds = flags.seconds;
  options.rounds = flags.rounds;
  options.objective = ObjectiveFrom(flags);
  options.budgets = *budgets;
  options.base_dir = DirectoryOf(config_path);
  options.trace_dir = flags.trace_dir;
  if (show_progress) {
    options.on_phase = [phase](const verify::Phase& p) {
      *phase = p;
      fmt::print(stderr, "\r\033[Kround {}/{}: {}", p.round, p.rounds, p.what);
      std::fflush(stderr);
    };
    options.on_run_progress = [phase](const runtime::Progress& p) {
      fmt::print(stderr, "\r\033[Kround {}/{}: {}", phase->round, phase->rounds, FormatProgress(p));
      std::fflush(stderr);
    };
  }
  StatusOr<verify::VerifyResult> result = verify::VerifyTune(*config, options);
  if (show_progress) fmt::print(stderr, "\r\033[K");
  if (!result.ok()) return ReportError(result.status());

  const verify::Round& best = result->rounds[result->best];
  std::string output = flags.output.empty() ? DefaultTunedPath(config_path) : flags.output;
  models::PipelineConfig tuned = best.config;
  models::RebaseRelativePaths(tuned, DirectoryOf(config_path), DirectoryOf(output));
  if (flags.format == "json") {
    models::Json document = models::Json::object();
    models::Json rounds = models::Json::array();
    for (const verify::Round& round : result->rounds) {
      rounds.push_back({{"round", round.index},
                        {"changes", round.changes},
                        {"predicted_throughput", round.predicted_throughput},
                        {"measured_throughput", round.measured_throughput},
                        {"threads", round.threads}});
    }
    document["rounds"] = std::move(rounds);
    document["best_round"] = best.index;
    document["measured_throughput"] = best.measured_throughput;
    document["predicted_throughput"] = best.predicted_throughput;
    document["stop_reason"] = result->stop_reason;
    document["config_path"] = output;
    Status written = models::SaveConfig(tuned, output);
    if (!written.ok()) return ReportError(written);
    if (flags.diff) {
      document["diff"] = tuner::UnifiedDiff(models::Serialize(*config), models::Serialize(tuned),
                                            "a/" + config_path, "b/" + output);
    }
    fmt::print("{}\n", document.dump(2));
    return kExitOk;
  }
  const verify::Round& last = result->rounds.back();
  if (last.has_plan) fmt::print("{}\n", tuner::FormatPlanText(last.plan));
  fmt::print("{}", verify::FormatRoundTable(*result));
  Status written = WriteTuned(*config, tuned, output, flags.diff, stdout);
  if (!written.ok()) return ReportError(written);
  fmt::print("tuned config (round {}): {}\n", best.index, output);
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
         "Trace of a run (more traces of the same pipeline add scaling points); with --verify: a config")
      ->required();
  sub->add_option("--cores", flags->cores,
                  "Core budget (default: the config's resources, else the traced host)")
      ->check(CLI::PositiveNumber);
  sub->add_option(
      "--memory", flags->memory,
      "Memory budget for buffers and caches, e.g. 4GiB (default: the config's resources, else 90% of "
      "the traced host's available memory)");
  sub->add_option("--max-threads", flags->max_threads, "Threads of all stages together (default 256)")
      ->check(CLI::PositiveNumber);
  sub->add_option("--cache-dir", flags->cache_dir, "Allow a cache on disk, in this directory");
  sub->add_option("--objective", flags->objective,
                  "max: the highest throughput; demand: the consumer's rate with the fewest cores")
      ->check(CLI::IsMember({"max", "demand"}));
  sub->add_option("-o,--output", flags->output,
                  "Tuned config to write (default: beside the traced config as NAME.tuned.json; relative paths in it are rewritten to name the same files)");
  sub->add_option("--format", flags->format, "Plan output: text or json")
      ->check(CLI::IsMember({"text", "json"}));
  sub->add_flag("--diff", flags->diff, "Show the change to the config as a unified diff");
  sub->add_flag(
      "--verify", flags->verify,
      "INPUT is a config: run it traced, tune, run the plan, refit, re-plan; keep the best measured");
  sub->add_option("--seconds", flags->seconds, "--verify: seconds per measured run (default 3)")
      ->check(CLI::PositiveNumber);
  sub->add_option("--rounds", flags->rounds, "--verify: plans to run after the first run (default 3)")
      ->check(CLI::NonNegativeNumber);
  sub->add_option("--trace-dir", flags->trace_dir, "--verify: keep each round's trace in this directory");
  sub->add_option("--progress", flags->progress,
                  "Live progress on stderr: auto (on a terminal), always, never")
      ->check(CLI::IsMember({"auto", "always", "never"}));
  sub->callback([flags, &exit_code] { exit_code = flags->verify ? TuneVerify(*flags) : TuneTraces(*flags); });
}

}  // namespace pipetune::cli

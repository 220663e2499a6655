// `pipetune autotune CONFIG [--seconds S] [-o TUNED.json]`: runs the config
// once and retunes it while it runs (workflow/autotune.h), printing each
// decision as it is made, then writes the settled knobs. The command's
// registration, for both forms (cmd_autotune.h).
#include "cmd_autotune.h"

#include <fmt/format.h>

#include <cstdio>
#include <memory>
#include <optional>
#include <string>

#include "cli_common.h"
#include "commands.h"
#include "pipetune/workflow/autotune.h"
#include "pipetune/workflow/exit_code.h"
#include "pipetune/workflow/tune.h"

namespace pipetune::cli {
namespace {}  // namespace

bool NamesAConfig(const std::vector<std::string>& inputs) {
  const std::string suffix = ".json";
  return inputs.size() == 1 && inputs[0].size() > suffix.size() &&
         inputs[0].compare(inputs[0].size() - suffix.size(), suffix.size(), suffix) == 0;
}

int RunAutotuneConfig(const AutotuneFlags& flags) {
  InterruptHandlers handlers;
  StatusOr<tuner::BudgetFlags> budgets =
      workflow::ParseBudgets(flags.cores, flags.memory, flags.max_threads, /*cache_dir=*/"");
  if (!budgets.ok()) return ReportError(budgets.status());
  workflow::AutotuneRequest request;
  request.config_path = flags.inputs[0];
  if (flags.seconds) request.seconds = *flags.seconds;
  if (flags.refit_every) request.refit_every_seconds = *flags.refit_every;
  request.budgets = *budgets;
  request.output = flags.output;
  request.trace_path = flags.trace_path;
  request.interrupt = &handlers.interrupted();
  request.on_decision = [](const workflow::AutotuneDecision& decision) {
    fmt::print("{}\n", workflow::FormatDecision(decision));
    std::fflush(stdout);
  };
  StatusOr<workflow::AutotuneResult> result = workflow::Autotune(request);
  if (!result.ok()) return ReportError(result.status());
  const workflow::AutotuneResult& r = *result;
  if (r.summary.interrupted) {
    fmt::print(stderr, "pipetune: interrupted by {} after {:.1f} s; the settled config covers what ran\n",
               handlers.signal() == SIGTERM ? "SIGTERM" : "SIGINT", r.summary.seconds);
  }
  fmt::print(
      "ran {:.1f} s: {:.4g} outputs/s over the run; {} refits, {:.1f} ms each on average ({:.1f} max)\n",
      r.summary.seconds, r.summary.throughput, r.refits, r.refit_ms_mean, r.refit_ms_max);
  if (r.settled_at_seconds) {
    fmt::print("settled at {:.1f} s\n", *r.settled_at_seconds);
  } else {
    fmt::print("still exploring when the run ended: the config holds the last knobs that measured well\n");
  }
  fmt::print("{}", r.written.diff && !r.written.diff->empty() ? *r.written.diff : "(no change)\n");
  fmt::print("settled config: {}\ntrace: {}\n", r.written.path, r.trace_path);
  return workflow::RunExitCode(r.summary.interrupted, handlers.signal());
}

void RegisterAutotuneCommand(CLI::App& app, int& exit_code) {
  auto flags = std::make_shared<AutotuneFlags>();
  CLI::App* sub = app.add_subcommand(
      "autotune",
      "Retune while it runs: CONFIG (the engine's workers and prefetch buffers, live; writes the settled "
      "config), or -- python3 train.py ... (a PyTorch DataLoader at each epoch boundary; writes the settled "
      "keyword arguments)");
  sub->add_option("input", flags->inputs,
                  "A pipeline config (JSON), or after --, the program and its arguments")
      ->expected(0, 1 << 20);
  sub->add_option("--cores", flags->cores, "Core budget (default: the config's resources, else the host)")
      ->check(Positive("cores"));
  sub->add_option("--memory", flags->memory,
                  "Memory budget, e.g. 4GiB (default: the config's resources, else 90% of the host's "
                  "available memory)");
  sub->add_option("-o,--output", flags->output,
                  "Settled config to write (default: beside the config as NAME.autotuned.json); for a "
                  "program, its settled DataLoader keyword arguments (default: TRACE's stem + "
                  ".dataloader.json)");
  sub->add_option("--trace", flags->trace_path,
                  "The run's trace (default: OUTPUT.ptrace for a config; pipetune.trace for a program, the "
                  "epochs before the first change)");
  sub->add_option("--seconds", flags->seconds, "A config: how long the pipeline runs (default 20)")
      ->check(Positive("seconds"));
  sub->add_option("--refit-every", flags->refit_every,
                  "A config: seconds between refits of the model (default 2)")
      ->check(Positive("seconds"));
  sub->add_option("--max-threads", flags->max_threads,
                  "A config: threads of all stages together (default 256)")
      ->check(Positive("threads", /*whole=*/true));
  sub->add_option("--interval-ms", flags->interval_ms,
                  "A program: the trace's snapshot interval (default 100)")
      ->check(Number({.what = "milliseconds", .min = 1, .max = 60000, .whole = true}));
  // What follows -- : CLI11 gives it to a positional of its own.
  sub->add_option("program", flags->program, "After --: the program and its arguments");
  sub->callback([flags, &exit_code] {
    flags->inputs.insert(flags->inputs.end(), flags->program.begin(), flags->program.end());
    if (flags->inputs.empty()) {
      exit_code = ReportError(MissingInput("autotune", "a pipeline config or a program after --",
                                           "pipetune autotune pipeline.json --seconds 20, or pipetune "
                                           "autotune -- python3 train.py"));
      return;
    }
    const bool config = NamesAConfig(flags->inputs);
    const char* misplaced = nullptr;
    if (config && flags->interval_ms) misplaced = "--interval-ms applies to a program, not a config";
    if (!config && flags->seconds) misplaced = "--seconds applies to a config (a program runs until it ends)";
    if (!config && flags->refit_every)
      misplaced = "--refit-every applies to a config (a program is retuned at its epochs)";
    if (!config && flags->max_threads) misplaced = "--max-threads applies to a config";
    if (misplaced != nullptr) {
      exit_code = ReportError(InvalidInput(std::string("autotune: ") + misplaced));
      return;
    }
    exit_code = config ? RunAutotuneConfig(*flags) : RunAutotuneJob(*flags);
  });
}

}  // namespace pipetune::cli

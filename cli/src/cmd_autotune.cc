// `pipetune autotune CONFIG [--seconds S] [-o TUNED.json]`: runs the config
// once and retunes it while it runs (workflow/autotune.h), printing each
// decision as it is made, then writes the settled knobs.
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
namespace {

struct AutotuneFlags {
  std::string config_path;
  double seconds = 20;
  double refit_every = 2;
  std::optional<double> cores;
  std::string memory;
  std::optional<int> max_threads;
  std::string output;
  std::string trace_path;
};

int RunAutotune(const AutotuneFlags& flags) {
  InterruptHandlers handlers;
  StatusOr<tuner::BudgetFlags> budgets =
      workflow::ParseBudgets(flags.cores, flags.memory, flags.max_threads, /*cache_dir=*/"");
  if (!budgets.ok()) return ReportError(budgets.status());
  workflow::AutotuneRequest request;
  request.config_path = flags.config_path;
  request.seconds = flags.seconds;
  request.refit_every_seconds = flags.refit_every;
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

}  // namespace

void RegisterAutotuneCommand(CLI::App& app, int& exit_code) {
  auto flags = std::make_shared<AutotuneFlags>();
  CLI::App* sub = app.add_subcommand(
      "autotune",
      "Run a config and retune its workers and prefetch buffers while it runs; write the settled config");
  sub->add_option("config", flags->config_path, "Pipeline config (JSON)");
  sub->add_option("--seconds", flags->seconds, "How long the pipeline runs (default 20)")
      ->check(Positive("seconds"));
  sub->add_option("--refit-every", flags->refit_every, "Seconds between refits of the model (default 2)")
      ->check(Positive("seconds"));
  sub->add_option("--cores", flags->cores, "Core budget (default: the config's resources, else the host)")
      ->check(Positive("cores"));
  sub->add_option("--memory", flags->memory,
                  "Memory budget for buffers, e.g. 4GiB (default: the config's resources, else 90% of the "
                  "host's available memory)");
  sub->add_option("--max-threads", flags->max_threads, "Threads of all stages together (default 256)")
      ->check(Positive("threads", /*whole=*/true));
  sub->add_option("-o,--output", flags->output,
                  "Settled config to write (default: beside the config as NAME.autotuned.json)");
  sub->add_option("--trace", flags->trace_path, "The run's trace (default: OUTPUT.ptrace)");
  sub->callback([flags, &exit_code] {
    if (flags->config_path.empty()) {
      exit_code = ReportError(
          MissingInput("autotune", "a pipeline config", "pipetune autotune pipeline.json --seconds 20"));
      return;
    }
    exit_code = RunAutotune(*flags);
  });
}

}  // namespace pipetune::cli

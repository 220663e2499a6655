// `pipetune run CONFIG`: runs a pipeline and its consumer, optionally traced.
#include <fmt/format.h>
#include <signal.h>

#include <atomic>
#include <cstdio>
#include <string>

#include "cli_common.h"
#include "commands.h"
#include "pipetune/base/files.h"
#include "pipetune/base/json.h"
#include "pipetune/models/config.h"
#include "pipetune/runtime/pipeline.h"
#include "pipetune/workflow/exit_code.h"
#include "pipetune/workflow/run.h"
#include "run_report.h"

namespace pipetune::cli {
namespace {

struct RunFlags {
  std::string config_path;
  double seconds = 0;
  std::string trace_path;
  std::string summary_path;
  std::string progress = "auto";
  bool deterministic = false;
};

// One line redrawn in place on a terminal; nothing when stderr is a file.
class ProgressLine {
 public:
  explicit ProgressLine(bool enabled) : enabled_(enabled) {}
  void Draw(const runtime::Progress& p) {
    if (!enabled_) return;
    fmt::print(stderr, "\r\033[K{}", FormatProgress(p));
    std::fflush(stderr);
    drawn_ = true;
  }
  void Clear() {
    if (drawn_) fmt::print(stderr, "\r\033[K");
    drawn_ = false;
  }

 private:
  bool enabled_;
  bool drawn_ = false;
};

int Run(const RunFlags& flags) {
  // From the start, so that a signal that comes while the config loads or
  // the trace opens also ends the run cleanly (it then stops at once).
  InterruptHandlers handlers;
  StatusOr<models::PipelineConfig> config = models::LoadConfig(flags.config_path);
  if (!config.ok()) return ReportError(config.status());

  bool show_progress = flags.progress == "always" || (flags.progress == "auto" && StderrIsTerminal());
  ProgressLine progress(show_progress);
  workflow::RunConfigOptions options;
  options.seconds = flags.seconds;
  options.trace_path = flags.trace_path;
  options.config_path = flags.config_path;
  options.deterministic = flags.deterministic;
  options.on_progress = [&progress](const runtime::Progress& p) { progress.Draw(p); };
  options.interrupt = &handlers.interrupted();
  StatusOr<runtime::RunSummary> summary = workflow::RunConfig(*config, options);
  progress.Clear();
  if (!summary.ok()) {
    int code = ReportError(summary.status());
    if (summary.status().code() == StatusCode::kFailed && !flags.trace_path.empty()) {
      fmt::print(stderr, "pipetune: the trace up to the failure is in {}\n", flags.trace_path);
    }
    return code;
  }
  if (summary->interrupted) {
    fmt::print(stderr, "pipetune: interrupted by {} after {:.1f} s; the summary covers what ran\n",
               handlers.signal() == SIGTERM ? "SIGTERM" : "SIGINT", summary->seconds);
  }
  fmt::print("{}", FormatRunSummary(*config, *summary));
  if (!flags.trace_path.empty()) fmt::print("trace: {}\n", flags.trace_path);
  if (!flags.summary_path.empty()) {
    Status written =
        WriteFileAtomically(flags.summary_path, DumpJson(runtime::SummaryToJson(*summary), 2) + "\n");
    if (!written.ok()) return ReportError(written);
    fmt::print("summary: {}\n", flags.summary_path);
  }
  return workflow::RunExitCode(summary->interrupted, handlers.signal());
}

}  // namespace

void RegisterRunCommand(CLI::App& app, int& exit_code) {
  auto flags = std::make_shared<RunFlags>();
  CLI::App* sub = app.add_subcommand("run", "Run a pipeline and its consumer; print what it achieved");
  sub->add_option("config", flags->config_path, "Pipeline config (JSON)")->required();
  sub->add_option("--seconds", flags->seconds,
                  "Stop after this many seconds (default: run to the end of a finite pipeline)")
      ->check(NonNegative("seconds"));
  sub->add_option("--trace", flags->trace_path, "Write a trace of the run to this file");
  sub->add_option("--summary", flags->summary_path, "Write the run's summary as JSON to this file");
  sub->add_option("--progress", flags->progress,
                  "Live progress on stderr: auto (on a terminal), always, never")
      ->check(CLI::IsMember({"auto", "always", "never"}));
  sub->add_flag("--deterministic", flags->deterministic, "Keep element order through parallel stages");
  sub->callback([flags, &exit_code] { exit_code = Run(*flags); });
}

}  // namespace pipetune::cli

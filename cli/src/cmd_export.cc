// `pipetune export TRACE... --format chrome -o FILE`: a timeline for
// ui.perfetto.dev (workflow/export.h: a DataLoader's main trace brings its
// workers' traces). The JSON goes to a temporary file beside FILE and is
// renamed into place, so FILE is never left half written.
#include <fmt/format.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "cli_common.h"
#include "commands.h"
#include "pipetune/base/files.h"
#include "pipetune/tracer/chrome_export.h"
#include "pipetune/workflow/export.h"

namespace pipetune::cli {
namespace {

struct ExportFlags {
  std::vector<std::string> trace_paths;
  std::string format = "chrome";
  std::string output_path;
  uint64_t max_events = tracer::ChromeExportOptions{}.max_events;
};

int Export(const ExportFlags& flags) {
  tracer::ChromeExportOptions options;
  options.max_events = flags.max_events;
  StatusOr<workflow::ExportResult> result = workflow::ExportResult{};
  Status status = WriteFileAtomically(flags.output_path, [&](std::ostream& out) {
    result = workflow::ExportTimeline(flags.trace_paths, out, options);
    return result.status();
  });
  if (!status.ok()) return ReportError(status);
  for (const std::string& warning : result->warnings) fmt::print(stderr, "pipetune: warning: {}\n", warning);
  fmt::print("wrote {} events to {}", result->events_written, flags.output_path);
  if (result->traces.size() > 1) fmt::print(" from {} traces (one process each)", result->traces.size());
  if (result->events_dropped > 0) {
    fmt::print(" ({} more left out by --max-events {})", result->events_dropped, flags.max_events);
  }
  fmt::print("; open it in https://ui.perfetto.dev\n");
  return kExitOk;
}

}  // namespace

void RegisterExportCommand(CLI::App& app, int& exit_code) {
  auto flags = std::make_shared<ExportFlags>();
  CLI::App* sub =
      app.add_subcommand("export", "Convert a trace for a timeline viewer (Chrome JSON for ui.perfetto.dev)");
  sub->add_option("traces", flags->trace_paths,
                  "Trace file written by pipetune run or profile; for a job on several nodes, each node's")
      ->required();
  sub->add_option("--format", flags->format, "Output format")
      ->check(CLI::IsMember({"chrome"}))
      ->capture_default_str();
  sub->add_option("-o,--output", flags->output_path, "Output file")->required();
  sub->add_option("--max-events", flags->max_events,
                  "Write at most this many events; the rest are counted and reported")
      ->capture_default_str()
      ->check(Positive("events", /*whole=*/true));
  sub->callback([flags, &exit_code] { exit_code = Export(*flags); });
}

}  // namespace pipetune::cli

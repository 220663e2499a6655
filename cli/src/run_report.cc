#include "run_report.h"

#include <fmt/format.h>

#include <algorithm>

#include "pipetune/base/size.h"

namespace pipetune::cli {

std::string FormatProgress(const runtime::Progress& p) {
  std::string line = fmt::format("{:7.1f} s  {:>9.1f} outputs/s  {:>9} outputs  stall {:3.0f}%", p.seconds,
                                 p.throughput, p.outputs, 100.0 * p.stall_fraction);
  if (p.buffer_bytes > 0) line += "  buffers " + FormatBytes(static_cast<double>(p.buffer_bytes));
  if (p.cache_bytes > 0) line += "  cache " + FormatBytes(static_cast<double>(p.cache_bytes));
  return line;
}

std::string FormatRunSummary(const models::PipelineConfig& config, const runtime::RunSummary& s) {
  std::string name = config.name.empty() ? "pipeline" : config.name;
  std::string out = fmt::format(
      "{}: {} outputs ({} examples) in {:.1f} s{}: {:.1f} outputs/s, {:.1f} examples/s; "
      "the consumer waited for data {:.1f}% of the time\n",
      name, s.outputs, s.source_elements, s.seconds, s.stopped_early ? " (time limit)" : "", s.throughput,
      s.examples_per_second, 100.0 * s.stall_fraction);
  if (s.steady_from_seconds > 0) {
    out += fmt::format("  steady state (after {:.1f} s of warm-up): {:.1f} examples/s\n",
                       s.steady_from_seconds, s.steady_examples_per_second);
  }
  size_t name_width = 5;
  for (const runtime::StageSummary& stage : s.stages) name_width = std::max(name_width, stage.name.size());
  out += fmt::format("  {:<{}}  {:<10}  {:>11}  {:>10}  {:>7}  {:>6}\n", "stage", name_width, "op",
                     "parallelism", "elements", "busy s", "failed");
  for (const runtime::StageSummary& stage : s.stages) {
    out += fmt::format("  {:<{}}  {:<10}  {:>11}  {:>10}  {:>7.2f}  {:>6}\n", stage.name, name_width,
                       stage.op, stage.parallelism, stage.elements, stage.busy_seconds, stage.failed);
  }
  if (s.peak_buffer_bytes > 0 || s.cache_bytes > 0) {
    out += fmt::format("  memory: buffers peaked at {}, memory caches hold {}\n",
                       FormatBytes(static_cast<double>(s.peak_buffer_bytes)),
                       FormatBytes(static_cast<double>(s.cache_bytes)));
  }
  if (s.failed_elements > 0) {
    out += fmt::format("  {} elements failed and were skipped; first errors:\n", s.failed_elements);
    for (const std::string& error : s.errors) out += "    " + error + "\n";
  }
  return out;
}

}  // namespace pipetune::cli

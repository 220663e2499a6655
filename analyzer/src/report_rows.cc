// Shared cells of the human-readable reports (report_rows.h).
#include "report_rows.h"

#include <fmt/format.h>

#include <cmath>

#include "format_util.h"
#include "pipetune/base/size.h"
#include "pipetune/models/config.h"

namespace pipetune::analyzer::internal {

Table StageTable(const Diagnosis& d) {
  Table table;
  table.header = {"stage",     "op",   "workers", "cores",    "out/s per core",
                  "max out/s", "busy", "wait in", "wait out", "limited by"};
  table.right_aligned = {false, false, true, true, true, true, true, true, true, false};
  for (const StageDiagnosis& s : d.stages) {
    std::string op = s.fn.empty() ? s.op : fmt::format("{}({})", s.op, s.fn);
    table.rows.push_back({
        s.name,
        op,
        std::to_string(s.parallelism),
        Cores(s.cores_used),
        s.rate_per_core > 0 ? Rate(s.rate_per_core) : "-",
        std::isfinite(s.max_throughput) ? Rate(s.max_throughput) : "-",
        Percent(s.busy_fraction),
        Percent(s.wait_input_fraction),
        Percent(s.wait_output_fraction),
        StageLimitName(s.limited_by),
    });
    table.highlighted.push_back(s.bottleneck);
  }
  return table;
}

std::string DropsText(const Diagnosis& d) {
  std::vector<std::string> parts;
  auto add = [&](uint64_t n, const char* what) {
    if (n > 0) parts.push_back(fmt::format("{} {}", n, what));
  };
  add(std::max(d.drops.spans, d.spans_dropped), "spans");
  add(d.drops.consumer_steps, "consumer steps");
  add(d.drops.gpu_records, "GPU records");
  add(d.drops.gpu_records_at_source, "GPU records at the source");
  if (parts.empty()) return "none";
  return fmt::format("{} (counted in every total; only not recorded one by one)", fmt::join(parts, ", "));
}

std::string RatioText(const Diagnosis& d) {
  return d.prediction_judged ? fmt::format("{:.2f}x", d.prediction_ratio)
                             : std::string("not judged: too short a window");
}

std::vector<std::pair<std::string, std::string>> Headline(const Diagnosis& d) {
  std::vector<std::pair<std::string, std::string>> lines;
  // A trace of GPU activity alone has no pipeline to rate.
  if (!d.stages.empty() || !d.gpu) {
    std::string bound = models::BoundKindName(d.bound);
    if (d.bottleneck) bound += fmt::format(", stage {}", *d.bottleneck);
    lines.emplace_back("throughput", fmt::format("{} outputs/s measured, {} predicted ({}); bound: {}",
                                                 Rate(d.measured_throughput), Rate(d.predicted_throughput),
                                                 RatioText(d), bound));
    std::string consumer = fmt::format("waits for input {} of the time", Percent(d.stall_fraction));
    if (d.demand_throughput) consumer += fmt::format("; demand {} outputs/s", Rate(*d.demand_throughput));
    lines.emplace_back("consumer", consumer);
  }
  std::string cpu = d.cores_used >= 0
                        ? fmt::format("{} of {} cores used", Cores(d.cores_used), CoreCount(d.cores))
                        : fmt::format("{} cores (process CPU not measured)", CoreCount(d.cores));
  if (d.cpu_contention > 1.01) cpu += fmt::format("; oversubscribed {:.2f}x", d.cpu_contention);
  lines.emplace_back("cpu", cpu);
  lines.emplace_back(
      "memory", fmt::format("peak RSS {}, buffers {}", FormatBytes(static_cast<double>(d.peak_rss_bytes)),
                            FormatBytes(d.buffer_bytes)));
  if (d.gpu) {
    const GpuAnalysis& a = d.gpu->analysis;
    if (a.verdict == GpuVerdict::kNoActivity) {
      lines.emplace_back("gpu", d.gpu->verdict);
    } else {
      lines.emplace_back("gpu",
                         fmt::format("busy {} ({} activities, {} device{}); input stalls {} of the idle time",
                                     Percent(d.gpu->busy_fraction), d.gpu->activities, a.devices.size(),
                                     a.devices.size() == 1 ? "" : "s", Percent(a.input_stall_share)));
      lines.emplace_back("gpu verdict", d.gpu->verdict);
    }
  }
  if (d.kind_report) {
    for (const auto& line : d.kind_report->headline) lines.push_back(line);
  }
  lines.emplace_back("drops", DropsText(d));
  lines.emplace_back("window", d.window_reason);
  if (!d.truncation_warning.empty())
    lines.emplace_back("WARNING", d.truncation_warning);
  else if (!d.ended_cleanly)
    lines.emplace_back("note", "the trace has no end record: the run did not stop cleanly");
  return lines;
}

std::vector<std::string> WhatIfLines(const Diagnosis& d) {
  std::vector<std::string> lines;
  for (const WhatIfOutcome& w : d.what_ifs) {
    if (!w.allowed) {
      lines.push_back(fmt::format("{}: not possible: {}", w.question, w.note));
      continue;
    }
    std::string line = fmt::format("{}: {} outputs/s ({:.2f}x), bound: {}", w.question, Rate(w.throughput),
                                   w.speedup, models::BoundKindName(w.bound));
    if (w.bottleneck) line += fmt::format(", stage {}", *w.bottleneck);
    if (w.cache_bytes) line += fmt::format("; cache holds {}", FormatBytes(*w.cache_bytes));
    if (!w.note.empty()) line += fmt::format(" ({})", w.note);
    lines.push_back(line);
  }
  return lines;
}

}  // namespace pipetune::analyzer::internal

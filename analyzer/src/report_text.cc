// The text report: the headline, one table with the bottleneck marked, the
// sentence. Meant to be read in ten seconds on a terminal.
#include <fmt/format.h>

#include <algorithm>

#include "report_rows.h"
#include "writers.h"

namespace pipetune::analyzer::internal {
namespace {

std::string RenderTable(const Table& table) {
  std::vector<size_t> widths(table.header.size(), 0);
  for (size_t c = 0; c < table.header.size(); ++c) widths[c] = table.header[c].size();
  for (const auto& row : table.rows) {
    for (size_t c = 0; c < row.size(); ++c) widths[c] = std::max(widths[c], row[c].size());
  }
  auto line = [&](const std::vector<std::string>& cells, const char* marker) {
    std::string out = marker;
    for (size_t c = 0; c < cells.size(); ++c) {
      if (c > 0) out += "  ";
      out += table.right_aligned[c] ? fmt::format("{:>{}}", cells[c], widths[c])
                                    : fmt::format("{:<{}}", cells[c], widths[c]);
    }
    while (!out.empty() && out.back() == ' ') out.pop_back();
    return out + "\n";
  };
  std::string out = line(table.header, "  ");
  for (size_t r = 0; r < table.rows.size(); ++r)
    out += line(table.rows[r], table.highlighted[r] ? "> " : "  ");
  return out;
}

class TextWriter : public ReportWriter {
 public:
  std::string Render(const Diagnosis& d) const override {
    std::string out = fmt::format("pipetune report: {} (trace {}, {:.1f} s)\n\n", d.pipeline_name,
                                  d.trace_name, d.trace_seconds);
    auto headline = Headline(d);
    size_t width = 0;
    for (const auto& [label, value] : headline) width = std::max(width, label.size());
    for (const auto& [label, value] : headline) out += fmt::format("{:<{}}  {}\n", label, width, value);
    // Appended piece by piece: `"\n" + <temporary>` makes GCC 12 at -O3 warn
    // (a false -Wrestrict in std::string's insert).
    out += '\n';
    if (d.kind_report && d.kind_report->processes) {
      const ProcessesReport& processes = *d.kind_report->processes;
      out += processes.name + ":\n";
      out += RenderTable(processes.table);
      out += fmt::format("  ({})\n\n", processes.line);
      out += processes.stages_heading + ":\n";
    }
    out += RenderTable(StageTable(d));
    out += d.bottleneck ? fmt::format("  (> marks the bottleneck, {})\n", *d.bottleneck) : "";
    out += fmt::format("\n{}\n", d.summary);
    std::vector<std::string> what_ifs = WhatIfLines(d);
    if (!what_ifs.empty()) {
      out += "\nwhat if:\n";
      for (const std::string& w : what_ifs) out += fmt::format("  {}\n", w);
    }
    if (!d.assumptions.empty()) {
      out += "\nassumptions:\n";
      for (const std::string& a : d.assumptions) out += fmt::format("  - {}\n", a);
    }
    return out;
  }
};

}  // namespace

std::unique_ptr<ReportWriter> MakeTextWriter() { return std::make_unique<TextWriter>(); }

}  // namespace pipetune::analyzer::internal

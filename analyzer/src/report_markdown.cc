// The Markdown report, for a CI job summary ($GITHUB_STEP_SUMMARY): the
// sentence first, the headline as a list, the stage table, the what-ifs.
#include <fmt/format.h>

#include "report_rows.h"
#include "writers.h"

namespace pipetune::analyzer::internal {
namespace {

// Markdown table cells must not contain a pipe or a newline.
std::string Cell(const std::string& text) {
  std::string out;
  for (char c : text) {
    if (c == '|')
      out += "\\|";
    else if (c == '\n')
      out += ' ';
    else
      out += c;
  }
  return out;
}

// `marked`: what a highlighted row is ("bottleneck", "straggler").
std::string MarkdownTable(const Table& table, const char* marked) {
  std::string out = "|";
  for (const std::string& h : table.header) out += " " + h + " |";
  out += "\n|";
  for (bool right : table.right_aligned) out += right ? " ---: |" : " --- |";
  out += "\n";
  for (size_t r = 0; r < table.rows.size(); ++r) {
    out += "|";
    for (size_t c = 0; c < table.rows[r].size(); ++c) {
      std::string cell = Cell(table.rows[r][c]);
      if (table.highlighted[r] && c == 0) cell = fmt::format("**{}** ({})", cell, marked);
      out += fmt::format(" {} |", cell);
    }
    out += "\n";
  }
  return out;
}

class MarkdownWriter : public ReportWriter {
 public:
  std::string Render(const Diagnosis& d) const override {
    std::string out = fmt::format("### pipetune report: {}\n\n", Cell(d.pipeline_name));
    out += fmt::format("**{}**\n\n", d.summary);
    for (const auto& [label, value] : Headline(d)) out += fmt::format("- **{}**: {}\n", label, value);
    out += fmt::format("- **trace**: `{}` ({:.1f} s)\n\n", d.trace_name, d.trace_seconds);
    if (d.kind_report && d.kind_report->processes) {
      const ProcessesReport& processes = *d.kind_report->processes;
      out += MarkdownTable(processes.table, processes.marked.c_str());
      out += fmt::format("\n{}\n\n", processes.line);
    }
    out += MarkdownTable(StageTable(d), "bottleneck");
    std::vector<std::string> what_ifs = WhatIfLines(d);
    if (!what_ifs.empty()) {
      out += "\n**What if**\n\n";
      for (const std::string& w : what_ifs) out += "- " + w + "\n";
    }
    if (!d.assumptions.empty()) {
      out += "\n<details><summary>Assumptions</summary>\n\n";
      for (const std::string& a : d.assumptions) out += "- " + a + "\n";
      out += "\n</details>\n";
    }
    return out;
  }
};

}  // namespace

std::unique_ptr<ReportWriter> MakeMarkdownWriter() { return std::make_unique<MarkdownWriter>(); }

}  // namespace pipetune::analyzer::internal

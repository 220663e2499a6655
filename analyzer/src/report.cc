// Choosing a report writer (report.h).
#include "pipetune/analyzer/report.h"

#include <fmt/format.h>

#include "writers.h"

namespace pipetune::analyzer {

StatusOr<ReportFormat> ParseReportFormat(std::string_view name) {
  if (name == "text") return ReportFormat::kText;
  if (name == "json") return ReportFormat::kJson;
  if (name == "markdown" || name == "md") return ReportFormat::kMarkdown;
  if (name == "html") return ReportFormat::kHtml;
  return InvalidInput(
      fmt::format("unknown report format \"{}\" (expected text, json, markdown or html)", name));
}

std::unique_ptr<ReportWriter> MakeReportWriter(ReportFormat format) {
  switch (format) {
    case ReportFormat::kText:
      return internal::MakeTextWriter();
    case ReportFormat::kJson:
      return internal::MakeJsonWriter();
    case ReportFormat::kMarkdown:
      return internal::MakeMarkdownWriter();
    case ReportFormat::kHtml:
      return internal::MakeHtmlWriter();
  }
  return internal::MakeTextWriter();
}

std::string RenderReport(const Diagnosis& diagnosis, ReportFormat format) {
  return MakeReportWriter(format)->Render(diagnosis);
}

}  // namespace pipetune::analyzer

// Reports: one interface, one writer per format. Every writer renders the
// same Diagnosis; none computes anything the others would not show.
//
//  - text:      a table read in ten seconds, the bottleneck marked, the sentence;
//  - json:      the stable schema of docs/report-json.md ("schema_version");
//  - markdown:  for CI job summaries (GitHub's $GITHUB_STEP_SUMMARY);
//  - html:      one self-contained file, inline CSS and SVG charts, no network.
//
// Output is deterministic for a given trace: no clock, host name or absolute
// path appears unless it is in the Diagnosis (the trace name is as given).
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "pipetune/analyzer/diagnosis.h"
#include "pipetune/base/status.h"

namespace pipetune::analyzer {

enum class ReportFormat { kText, kJson, kMarkdown, kHtml };

// "text", "json", "markdown" (or "md"), "html".
StatusOr<ReportFormat> ParseReportFormat(std::string_view name);

// The JSON report's schema version; bumped only on incompatible changes.
inline constexpr int kReportSchemaVersion = 1;

class ReportWriter {
 public:
  virtual ~ReportWriter() = default;
  // The whole report, ending with a newline.
  virtual std::string Render(const Diagnosis& diagnosis) const = 0;
};

std::unique_ptr<ReportWriter> MakeReportWriter(ReportFormat format);

// Convenience: MakeReportWriter(format)->Render(diagnosis).
std::string RenderReport(const Diagnosis& diagnosis, ReportFormat format);

}  // namespace pipetune::analyzer

// The report writers behind MakeReportWriter (report.h), one per format,
// each in its own file.
#pragma once

#include <memory>

#include "pipetune/analyzer/report.h"

namespace pipetune::analyzer::internal {

std::unique_ptr<ReportWriter> MakeTextWriter();
std::unique_ptr<ReportWriter> MakeJsonWriter();
std::unique_ptr<ReportWriter> MakeMarkdownWriter();
std::unique_ptr<ReportWriter> MakeHtmlWriter();

}  // namespace pipetune::analyzer::internal

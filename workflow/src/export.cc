// One trace exported alone (export.h), whatever its kind; which traces go
// on one timeline, and how, the recording's adapter decides (commands.cc).
#include "pipetune/workflow/export.h"

#include <fmt/format.h>

#include "pipetune/tracer/reader.h"

namespace pipetune::workflow {
namespace internal {

StatusOr<ExportResult> ExportOneTrace(const std::string& trace_path, std::ostream& out,
                                      const tracer::ChromeExportOptions& options) {
  tracer::ChromeExportStats stats;
  PIPETUNE_RETURN_IF_ERROR(tracer::ExportChrome(trace_path, out, options, &stats));
  ExportResult result{stats.events_written, stats.events_dropped, {}, {trace_path}, {stats.events_written}};
  if (!stats.read_report.warning.empty()) result.warnings.push_back(stats.read_report.warning);
  return result;
}

}  // namespace internal

}  // namespace pipetune::workflow

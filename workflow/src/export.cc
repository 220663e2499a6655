// What `pipetune export` puts on the timeline (export.h): the recording's
// adapter decides (a DataLoader run's traces gathered and labelled from
// their records, dataloader_export.cc); one trace alone is exported here.
#include "pipetune/workflow/export.h"

#include <fmt/format.h>

#include "adapter.h"
#include "pipetune/tracer/reader.h"
#include "pipetune/workflow/recording.h"

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

StatusOr<ExportResult> ExportTimeline(const std::vector<std::string>& trace_paths, std::ostream& out,
                                      const tracer::ChromeExportOptions& options) {
  if (trace_paths.empty()) return InvalidInput("no trace to export");
  return OpenRecording(trace_paths).adapter->Export(trace_paths, out, options);
}

}  // namespace pipetune::workflow

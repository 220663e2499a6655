// Traces -> one diagnosis -> the report (report.h).
#include "pipetune/workflow/report.h"

#include <fmt/format.h>

#include <utility>

#include "adapter.h"
#include "pipetune/base/files.h"
#include "pipetune/workflow/recording.h"

namespace pipetune::workflow {
namespace {

StatusOr<analyzer::Diagnosis> DiagnoseAny(const ReportRequest& request) {
  analyzer::DiagnoseOptions options;
  options.what_ifs = request.what_ifs;
  return OpenRecording(request.traces).adapter->Diagnose(request.traces, options);
}

}  // namespace

StatusOr<ReportResult> Report(const ReportRequest& request) {
  if (request.traces.empty()) return InvalidInput("report: no trace given");
  PIPETUNE_ASSIGN_OR_RETURN(analyzer::Diagnosis diagnosis, DiagnoseAny(request));
  ReportResult result;
  result.text = analyzer::RenderReport(diagnosis, request.format);
  result.diagnosis = std::move(diagnosis);
  if (!request.output.empty() && request.output != "-") {
    PIPETUNE_RETURN_IF_ERROR(WriteFileAtomically(request.output, result.text));
    result.written = true;
  }
  return result;
}

}  // namespace pipetune::workflow

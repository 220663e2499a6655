// Traces -> one diagnosis -> the report (report.h).
#include "pipetune/workflow/report.h"

#include <fmt/format.h>

#include <utility>

#include "decode_probe.h"
#include "pipetune/analyzer/dataloader.h"
#include "pipetune/analyzer/dataloader_job.h"
#include "pipetune/base/files.h"
#include "pipetune/models/config.h"
#include "pipetune/workflow/recording.h"

namespace pipetune::workflow {
namespace {

StatusOr<analyzer::Diagnosis> DiagnoseAny(const ReportRequest& request) {
  analyzer::DiagnoseOptions options;
  options.what_ifs = request.what_ifs;
  if (!OpenRecording(request.traces).is_dataloader()) {
    options.measure_jpeg = MeasureDecodeCropHost;
    return analyzer::DiagnoseTraces(request.traces, options);
  }
  // A DataLoader run is its main traces (one per process that consumed a
  // DataLoader: T and the T.main.<pid> files beside it) and their workers'
  // traces; several runs given are the nodes of one job (docs/distributed.md).
  PIPETUNE_ASSIGN_OR_RETURN(analyzer::DataLoaderJob job, analyzer::ReadDataLoaderJob(request.traces));
  return analyzer::DiagnoseDataLoaderJob(job, options);
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

// What a job of several processes adds to its reports: the rank table and
// its keys of the JSON report, placed in the kind's report section
// (diagnosis.h, KindReport) when the job is diagnosed (DiagnoseDataLoaderJob),
// so that the report writers never ask whether they render a job.
#pragma once

#include "pipetune/analyzer/dataloader_sections.h"
#include "pipetune/analyzer/diagnosis.h"

namespace pipetune::analyzer::internal {

// `report.processes` (one row per rank: rank, local rank, host, pid,
// batches/s, input/s, data wait, step, bound or bottleneck, workers, cores,
// peak RSS, how it ended; the straggler's row marked) and the JSON keys
// "ranks", "straggler" and "job" (docs/report-json.md), after the kind's own.
void AddJobReport(const JobSection& job, KindReport& report);

}  // namespace pipetune::analyzer::internal

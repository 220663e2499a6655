// What a DataLoader run adds to its reports, in its own words: the kind's
// report section (diagnosis.h, KindReport), made when the run is diagnosed
// (DiagnoseDataLoader), so that the report writers never ask which kind of
// run they render.
#pragma once

#include "pipetune/analyzer/dataloader_sections.h"
#include "pipetune/analyzer/diagnosis.h"

namespace pipetune::analyzer::internal {

// The headline's lines (the DataLoader's settings, its batches and epochs,
// how long a run must be, the notes) and the JSON report's "dataloader"
// section (docs/report-json.md).
KindReport DataLoaderKindReport(const DataLoaderSection& dl);

}  // namespace pipetune::analyzer::internal

// `pipetune report TRACE...`: the diagnosis of a traced run, whatever wrote
// the trace (a config run by `pipetune run`, a program linking the tracer, a
// PyTorch DataLoader recorded by the Python bootstrap), rendered by the one
// set of report writers. The CLI parses flags and prints; this reads,
// diagnoses, renders and writes.
#pragma once

#include <string>
#include <vector>

#include "pipetune/analyzer/diagnosis.h"
#include "pipetune/analyzer/report.h"
#include "pipetune/base/status.h"

namespace pipetune::workflow {

struct ReportRequest {
  std::vector<std::string> traces;  // the first is diagnosed; the others feed the scaling fit
  analyzer::ReportFormat format = analyzer::ReportFormat::kText;
  std::vector<std::string> what_ifs;
  std::string output;  // a file, written whole or not at all; empty or "-": returned only
};

struct ReportResult {
  analyzer::Diagnosis diagnosis;
  std::string text;  // the rendered report
  bool written = false;
};

// Errors (kInvalidInput, naming the file, the stage or the knob): traces that
// do not read, a DataLoader trace given with others, a what-if the pipeline
// cannot answer (num_workers on a config).
StatusOr<ReportResult> Report(const ReportRequest& request);

}  // namespace pipetune::workflow

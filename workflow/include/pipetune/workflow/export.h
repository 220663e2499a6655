// `pipetune export TRACE --format chrome -o FILE`: a timeline for
// ui.perfetto.dev. The CLI parses flags and writes the file; this chooses
// what goes on the timeline.
#pragma once

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "pipetune/base/status.h"
#include "pipetune/tracer/chrome_export.h"

namespace pipetune::workflow {

struct ExportResult {
  uint64_t events_written = 0;
  uint64_t events_dropped = 0;  // beyond options.max_events
  // Sentences for stderr, naming the file: a worker's trace that could not
  // be read (left out), a truncated trace (exported to its last whole chunk).
  std::vector<std::string> warnings;
  // The traces on the timeline, the one given first; per trace, the events
  // written for it (0 for one left out).
  std::vector<std::string> traces;
  std::vector<uint64_t> events_per_trace;
};

// Writes the Chrome trace JSON for `trace_paths` to `out`: one trace, or the
// main traces of one job's nodes (each node's `pipetune profile --trace T`,
// gathered), which must all be DataLoader main traces of one job as
// `report` reads them (analyzer::ReadDataLoaderJob).
//
// A PyTorch DataLoader's main trace (the Python bootstrap's, role "main";
// docs/pytorch.md) brings every TRACE.<pid> beside it: one time-aligned
// timeline (tracer::ExportChromeTimeline) with a process "main (pid N)" and
// one "DataLoader worker K (pid N)" per worker trace, each with its stages'
// tracks, and on the main process, per DataLoader with workers, the counter
// "loaderN batches in flight" (the workers' collated batches minus those the
// main process's next() took). Any other trace, a worker's TRACE.<pid> given
// alone included, is exported alone (tracer::ExportChrome), as it always was.
// A job's processes are labelled by rank ("rank R main", "rank R DataLoader
// worker K"), with the host first when the job ran on several; ranks in
// order, so that a job of many nodes reads top to bottom.
//
// Errors (kInvalidInput, naming the file): the trace given cannot be read
// (missing, not a trace, a newer format); of several, one is not a
// DataLoader main trace, or they are not one job (ReadDataLoaderJob's: two
// traces of one rank, different world sizes). `out` may then hold part of
// the JSON.
StatusOr<ExportResult> ExportTimeline(const std::vector<std::string>& trace_paths, std::ostream& out,
                                      const tracer::ChromeExportOptions& options = {});

}  // namespace pipetune::workflow

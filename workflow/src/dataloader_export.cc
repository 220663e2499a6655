// `pipetune export` of a DataLoader run (export.h): its traces gathered
// and labelled from their records, one timeline with a process per main
// and worker process, and each loader's batches in flight.
#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <set>

#include "adapter.h"
#include "pipetune/analyzer/dataloader_job.h"
#include "pipetune/analyzer/dataloader_trace.h"
#include "pipetune/tracer/reader.h"

namespace pipetune::workflow {
namespace {

// The main traces on the timeline, each with its label's prefix: "rank R "
// in a job ("HOST rank R " when it ran on several hosts), "" for a run of
// one process. Several traces given are one job's nodes, read and checked as
// `report` reads them (ReadDataLoaderJob).
StatusOr<std::vector<std::pair<std::string, std::string>>> MainTraces(const std::vector<std::string>& given) {
  if (given.size() == 1 && analyzer::JobTracePaths(given[0]).size() == 1) return {{{given[0], ""}}};
  PIPETUNE_ASSIGN_OR_RETURN(analyzer::DataLoaderJob job, analyzer::ReadDataLoaderJob(given));
  std::vector<std::pair<std::string, std::string>> mains;
  for (const analyzer::DataLoaderJobProcess& process : job.processes) {
    const analyzer::DataLoaderProfile& p = process.profile;
    std::string prefix = p.rank ? fmt::format("rank {} ", *p.rank) : "";
    if (job.hosts > 1) prefix = p.hostname + " " + prefix;
    mains.emplace_back(p.trace_path, prefix);
  }
  return mains;
}

}  // namespace

namespace internal {

StatusOr<ExportResult> ExportDataLoaderRun(const std::vector<std::string>& trace_paths, std::ostream& out,
                                           const tracer::ChromeExportOptions& options) {
  for (const std::string& path : trace_paths) {
    if (analyzer::ReadDataLoaderRole(path).role == "main") continue;
    if (trace_paths.size() == 1) return ExportOneTrace(path, out, options);
    PIPETUNE_RETURN_IF_ERROR(tracer::ReadTraceHeader(path).status());  // missing, not a trace: say so
    return InvalidInput(fmt::format(
        "{} is not a DataLoader's main trace: export takes one trace, or the traces of one job's nodes (each "
        "node's `pipetune profile --trace T`)",
        path));
  }

  // The run's processes: each main one (every rank's, for a job: each T and
  // the T.main.<pid> beside it), then its workers, labelled from their
  // records; a worker serves the DataLoader its record names.
  PIPETUNE_ASSIGN_OR_RETURN(auto mains, MainTraces(trace_paths));
  std::vector<std::string> paths;
  std::vector<tracer::ChromeTimelineTrace> traces;
  std::vector<size_t> main_of;            // per trace: its main process's index in traces
  std::map<size_t, std::string> rank_of;  // per main process: its label's prefix
  std::vector<int> loader_of;             // per trace: the DataLoader a worker serves (0: none)
  std::set<std::pair<size_t, int>> loaders;
  for (const auto& [main, rank] : mains) {
    std::vector<std::string> process = analyzer::DataLoaderTracePaths(main);
    const size_t main_index = traces.size();
    rank_of[main_index] = rank;
    traces.push_back({process[0], rank + "main"});
    paths.push_back(process[0]);
    main_of.push_back(main_index);
    loader_of.push_back(0);
    for (size_t i = 1; i < process.size(); ++i) {
      const analyzer::DataLoaderProcessRole role = analyzer::ReadDataLoaderRole(process[i]);
      std::string label;
      int loader = 0;
      if (role.role == "worker") {
        label = fmt::format("{}DataLoader worker {}", rank, role.worker_id);
        loader = role.loader;
        if (loader > 0) loaders.insert({main_index, loader});
      }
      traces.push_back({process[i], label});
      paths.push_back(process[i]);
      main_of.push_back(main_index);
      loader_of.push_back(loader);
    }
  }
  std::set<size_t> mains_with_loaders;
  for (const auto& [main_index, loader] : loaders) mains_with_loaders.insert(main_index);
  for (size_t main_index : mains_with_loaders) {  // say which DataLoader each worker served
    if (std::count_if(loaders.begin(), loaders.end(), [&](const auto& l) { return l.first == main_index; }) <
        2)
      continue;
    for (size_t i = 0; i < traces.size(); ++i) {
      if (main_of[i] == main_index && loader_of[i] > 0)
        traces[i].label += fmt::format(" of loader{}", loader_of[i]);
    }
  }

  // Per DataLoader with workers: batches collated by its workers and not yet
  // taken by its main process's next() (the loader's stages are
  // "loaderN/next" in the main trace; "collate" in a worker's).
  std::vector<tracer::ChromeTimelineQueue> queues;
  for (const auto& [main_index, loader] : loaders) {
    tracer::ChromeTimelineQueue queue;
    queue.name = fmt::format("{}loader{} batches in flight", rank_of[main_index], loader);
    queue.unit = "batches";
    queue.consumer = {main_index, fmt::format("loader{}/next", loader)};
    for (size_t i = 0; i < traces.size(); ++i) {
      if (main_of[i] == main_index && loader_of[i] == loader) queue.producers.push_back({i, "collate"});
    }
    queues.push_back(std::move(queue));
  }

  tracer::ChromeTimelineStats stats;
  PIPETUNE_RETURN_IF_ERROR(tracer::ExportChromeTimeline(traces, queues, out, options, &stats));
  ExportResult result{stats.events_written, stats.events_dropped, stats.warnings, paths,
                      stats.events_per_trace};
  return result;
}

}  // namespace internal
}  // namespace pipetune::workflow

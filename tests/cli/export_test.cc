// `pipetune export` of the golden DataLoader runs
// (tests/analyzer/dataloader_golden/): the main trace brings its workers'
// traces onto one timeline that Perfetto opens, a process per trace, time
// aligned, with the batches in flight as a counter; a worker's trace alone
// and any other trace export as they always did.
#include "pipetune/workflow/export.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <set>
#include <sstream>
#include <string>

#include "cli_test_util.h"
#include "pipetune/analyzer/dataloader_trace.h"
#include "pipetune/base/json.h"
#include "pipetune/tracer/chrome_export.h"

namespace pipetune::testing {
namespace {

namespace fs = std::filesystem;

std::string ExportGolden(const std::string& name) {
  return SourcePath("tests/analyzer/dataloader_golden/" + name + "/trace");
}

Json ExportDataLoaderOrFail(const std::string& trace, workflow::ExportResult* result) {
  std::ostringstream out;
  StatusOr<workflow::ExportResult> r = workflow::ExportTimeline({trace}, out);
  EXPECT_TRUE(r.ok()) << r.status().message();
  if (r.ok() && result != nullptr) *result = *r;
  Json doc = Json::parse(out.str(), nullptr, /*allow_exceptions=*/false);
  EXPECT_FALSE(doc.is_discarded()) << out.str().substr(0, 2000);
  return doc;
}

// Every event as the Chrome trace event format has it, in the subset
// Perfetto imports: a known phase, numeric pid and ts, "X" with dur >= 0,
// names on metadata.
void ExpectWellFormed(const Json& doc) {
  ASSERT_TRUE(doc.is_object() && doc.contains("traceEvents") && doc["traceEvents"].is_array());
  const std::set<std::string> phases{"X", "M", "C", "i"};
  for (const Json& e : doc["traceEvents"]) {
    ASSERT_TRUE(e.is_object()) << e.dump();
    ASSERT_TRUE(e.contains("ph") && e["ph"].is_string()) << e.dump();
    const std::string ph = e["ph"];
    EXPECT_TRUE(phases.count(ph)) << e.dump();
    EXPECT_TRUE(e.contains("name") && e["name"].is_string()) << e.dump();
    EXPECT_TRUE(e.contains("pid") && e["pid"].is_number_integer()) << e.dump();
    if (ph == "M") {
      if (e["name"] == "process_name" || e["name"] == "thread_name") {
        EXPECT_TRUE(e["args"]["name"].is_string()) << e.dump();
      }
      continue;
    }
    EXPECT_TRUE(e.contains("ts") && e["ts"].is_number()) << e.dump();
    if (ph == "X") {
      EXPECT_TRUE(e["tid"].is_number_integer()) << e.dump();
      ASSERT_TRUE(e.contains("dur") && e["dur"].is_number()) << e.dump();
      EXPECT_GE(e["dur"].get<double>(), 0.0) << e.dump();
    }
    if (ph == "C") {
      ASSERT_TRUE(e["args"].is_object() && !e["args"].empty()) << e.dump();
      for (const auto& [series, value] : e["args"].items()) EXPECT_TRUE(value.is_number()) << e.dump();
    }
  }
}

struct ExportedTimeline {
  std::map<int64_t, std::string> process_names;
  std::map<int64_t, std::set<std::string>> slice_names;  // "X" events by pid
  std::map<int64_t, std::pair<double, double>> span;     // first start, last end of slices by pid
  std::map<int64_t, size_t> events;
  std::vector<double> in_flight;  // the queue counter's values
  int64_t in_flight_pid = -1;
};

ExportedTimeline ReadExportedTimeline(const Json& doc) {
  ExportedTimeline t;
  for (const Json& e : doc["traceEvents"]) {
    const int64_t pid = e["pid"];
    ++t.events[pid];
    if (e["ph"] == "M" && e["name"] == "process_name") t.process_names[pid] = e["args"]["name"];
    if (e["ph"] == "X") {
      t.slice_names[pid].insert(e["name"].get<std::string>());
      double begin = e["ts"], end = begin + e["dur"].get<double>();
      auto [it, first] = t.span.emplace(pid, std::make_pair(begin, end));
      if (!first) it->second = {std::min(it->second.first, begin), std::max(it->second.second, end)};
    }
    if (e["ph"] == "C" && e["name"] == "loader1 batches in flight") {
      t.in_flight.push_back(e["args"]["batches"]);
      t.in_flight_pid = pid;
    }
  }
  return t;
}

TEST(ExportDataLoader, TheMainTraceAndEachWorkerAreOneTimeline) {
  for (const std::string name : {"map_workers2_fork", "iterable_workers2"}) {
    SCOPED_TRACE(name);
    workflow::ExportResult result;
    Json doc = ExportDataLoaderOrFail(ExportGolden(name), &result);
    ExpectWellFormed(doc);
    EXPECT_TRUE(result.warnings.empty());
    ASSERT_EQ(result.traces.size(), 3u);  // the main trace and two workers'
    EXPECT_EQ(doc["otherData"]["clock"], "CLOCK_MONOTONIC");

    ExportedTimeline t = ReadExportedTimeline(doc);
    ASSERT_EQ(t.process_names.size(), 3u);
    int64_t main_pid = -1;
    std::set<std::string> workers;
    for (const auto& [pid, process] : t.process_names) {
      EXPECT_EQ(process.substr(process.find(" (pid ")), " (pid " + std::to_string(pid) + ")");
      if (process.rfind("main (pid ", 0) == 0) main_pid = pid;
      if (process.rfind("DataLoader worker ", 0) == 0) workers.insert(process.substr(0, 19));
    }
    ASSERT_NE(main_pid, -1);
    EXPECT_EQ(workers, (std::set<std::string>{"DataLoader worker 0", "DataLoader worker 1"}));

    // Each worker's samples and batches, on its own process, within the
    // main process's time: the clocks were put together.
    const auto [main_begin, main_end] = t.span.at(main_pid);
    EXPECT_TRUE(t.slice_names[main_pid].count("loader1/next"));
    for (const auto& [pid, process] : t.process_names) {
      if (pid == main_pid) continue;
      EXPECT_TRUE(t.slice_names[pid].count("load")) << process;
      EXPECT_TRUE(t.slice_names[pid].count("collate")) << process;
      EXPECT_FALSE(t.slice_names[pid].count("loader1/next")) << process;
      EXPECT_GE(t.span[pid].first, main_begin) << process;
      EXPECT_LE(t.span[pid].second, main_end) << process;
    }

    // Batches collated and not yet taken: on the main process, never
    // negative, and some in flight at some point (two workers prefetch).
    EXPECT_EQ(t.in_flight_pid, main_pid);
    ASSERT_FALSE(t.in_flight.empty());
    EXPECT_GE(*std::min_element(t.in_flight.begin(), t.in_flight.end()), 0.0);
    EXPECT_GT(*std::max_element(t.in_flight.begin(), t.in_flight.end()), 0.0);
    uint64_t total = 0;
    for (uint64_t n : result.events_per_trace) total += n;
    EXPECT_LE(total, result.events_written);
  }
}

TEST(ExportDataLoader, AWorkersTraceAloneAndOtherTracesExportAsBefore) {
  for (const std::string& trace :
       {SourcePath("tests/analyzer/dataloader_golden/map_workers2_fork/trace.21236"),
        SourcePath("tests/cli/golden/two_stage_cpu.trace"),
        SourcePath("tests/cli/golden/slow_consumer.trace")}) {
    SCOPED_TRACE(trace);
    std::ostringstream timeline, alone;
    ASSERT_TRUE(workflow::ExportTimeline({trace}, timeline).ok());
    ASSERT_TRUE(tracer::ExportChrome(trace, alone).ok());
    EXPECT_EQ(timeline.str(), alone.str());
  }
}

TEST(ExportDataLoader, AnUnreadableWorkerTraceIsLeftOutAndATruncatedOneReadToItsLastChunk) {
  TempDir dir("export_dataloader");
  const fs::path golden = SourcePath("tests/analyzer/dataloader_golden/map_workers2_fork");
  for (const auto& entry : fs::directory_iterator(golden))
    fs::copy_file(entry.path(), dir.path() / entry.path().filename());
  WriteFile(dir / "trace.1", "not a trace");
  const std::string worker = ReadFile(golden / "trace.21239");
  WriteFile(dir / "trace.21239", worker.substr(0, worker.size() - 7));  // killed mid-chunk
  CommandResult r = RunPipetune("export " + (dir / "trace") + " --format chrome -o " + (dir / "t.json"));
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("warning: left out " + (dir / "trace.1")), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("warning: " + (dir / "trace.21239") + ": trace truncated"), std::string::npos)
      << r.err;
  ExportedTimeline t = ReadExportedTimeline(Json::parse(ReadFile(dir / "t.json")));
  EXPECT_EQ(t.process_names.size(), 3u);
}

// Copies a golden run (its main trace and its workers') into `dir` as NAME
// and NAME.<pid>; returns the main trace's path.
std::string CopyGoldenRun(const TempDir& dir, const std::string& golden, const std::string& name) {
  for (const auto& entry : fs::directory_iterator(SourcePath("tests/analyzer/dataloader_golden/" + golden))) {
    const std::string file = entry.path().filename().string();
    if (file.rfind("trace", 0) != 0) continue;
    fs::copy_file(entry.path(), dir.path() / (name + file.substr(5)));
  }
  return dir / name;
}

TEST(ExportDataLoader, TheTracesOfAJobsNodesAreOneTimeline) {
  TempDir dir("export_nodes");
  // Two nodes' `profile --trace`, gathered: rank 1 of 2 with no workers, and
  // a process with two workers (no rank: ranked processes come first).
  const std::string node0 = CopyGoldenRun(dir, "map_workers2_fork", "node0.trace");
  const std::string node1 = CopyGoldenRun(dir, "iterable_workers0", "node1.trace");
  std::ostringstream out;
  StatusOr<workflow::ExportResult> result = workflow::ExportTimeline({node0, node1}, out);
  ASSERT_TRUE(result.ok()) << result.status().message();
  EXPECT_EQ(result->traces.size(), 4u);  // two mains, two workers
  EXPECT_EQ(result->traces[0], node1);
  Json doc = Json::parse(out.str());
  ExpectWellFormed(doc);
  std::set<std::string> labels;
  for (const auto& [pid, process] : ReadExportedTimeline(doc).process_names) {
    labels.insert(process.substr(0, process.find(" (pid ")));
  }
  EXPECT_EQ(labels,
            (std::set<std::string>{"rank 1 main", "main", "DataLoader worker 0", "DataLoader worker 1"}));

  // The same rank twice is two runs given together, as `report` says.
  const std::string again = CopyGoldenRun(dir, "iterable_workers0", "again.trace");
  std::ostringstream ignored;
  StatusOr<workflow::ExportResult> twice = workflow::ExportTimeline({node1, again}, ignored);
  ASSERT_FALSE(twice.ok());
  EXPECT_NE(twice.status().message().find("are both rank 1"), std::string::npos) << twice.status().message();

  // Beside others, a worker's trace or an engine run's is a mistake: exit 2
  // naming it, and no file written.
  for (const std::string& other :
       {analyzer::DataLoaderTracePaths(node0)[1], SourcePath("tests/cli/golden/two_stage_cpu.trace")}) {
    CommandResult r = RunPipetune("export " + node0 + " " + other + " -o " + (dir / "bad.json"));
    EXPECT_EQ(r.exit_code, 2) << r.err;
    EXPECT_NE(r.err.find(other + " is not a DataLoader's main trace"), std::string::npos) << r.err;
    EXPECT_FALSE(fs::exists(dir / "bad.json"));
  }
  CommandResult missing =
      RunPipetune("export " + node0 + " " + (dir / "gone.trace") + " -o " + (dir / "bad.json"));
  EXPECT_EQ(missing.exit_code, 2) << missing.err;
  EXPECT_NE(missing.err.find(dir / "gone.trace"), std::string::npos) << missing.err;
  EXPECT_EQ(missing.err.find("is not a DataLoader's main trace"), std::string::npos) << missing.err;
}

TEST(ExportDataLoader, TheBinaryExportsEveryProcess) {
  TempDir dir("export_binary");
  CommandResult r = RunPipetuneBinary("export " + ExportGolden("map_workers2_fork") + " --format chrome -o " +
                                      (dir / "timeline.json"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("from 3 traces"), std::string::npos) << r.out;
  Json doc = Json::parse(ReadFile(dir / "timeline.json"), nullptr, /*allow_exceptions=*/false);
  ASSERT_FALSE(doc.is_discarded());
  EXPECT_GT(ReadExportedTimeline(doc).events.size(), 1u);
  EXPECT_FALSE(fs::exists(dir / "timeline.json.tmp"));
}

}  // namespace
}  // namespace pipetune::testing

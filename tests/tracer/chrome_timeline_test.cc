// ExportChromeTimeline on hand-made traces whose times are known: one
// process per trace, put on one clock (CLOCK_MONOTONIC on one host,
// CLOCK_REALTIME across hosts), a queue counter from the snapshots, and
// traces that cannot be read.
#include <gtest/gtest.h>

#include <map>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "format.h"
#include "pipetune/base/json.h"
#include "pipetune/tracer/chrome_export.h"
#include "test_util.h"

namespace pipetune::tracer {
namespace {

constexpr uint64_t kTlMs = 1'000'000;

struct TimelineHandMadeTrace {
  uint32_t pid = 0;
  std::string host = "host-a";
  uint64_t start_ns = 0;
  int64_t start_unix_ns = 0;
  std::string stage;
  std::vector<std::pair<uint64_t, uint64_t>> spans;      // begin, end
  std::vector<std::pair<uint64_t, uint64_t>> snapshots;  // time, produced
};

std::string TimelineTraceBytes(const TimelineHandMadeTrace& t) {
  TraceHeader header;
  header.format_version = kTraceFormatVersion;
  header.pid = t.pid;
  header.clock.start_ns = t.start_ns;
  header.clock.start_unix_ns = t.start_unix_ns;
  header.host.hostname = t.host;
  header.pipeline.name = "hand-made";
  std::string out = internal::EncodeFilePreamble(header);
  internal::AppendStagesChunk(out, {StageDef{0, t.stage, "map", 1}});
  internal::AppendWorkersChunk(out, {WorkerDef{0, 0, t.pid, t.start_ns}});
  std::vector<SpanRecord> spans;
  for (const auto& [begin, end] : t.spans) spans.push_back(SpanRecord{0, 0, spans.size(), begin, end});
  internal::AppendSpansChunk(out, spans);
  for (const auto& [time, produced] : t.snapshots) {
    StageSnapshot s;
    s.time_ns = time;
    s.stage = 0;
    s.produced = produced;
    internal::AppendSnapshotChunk(out, time, {s});
  }
  internal::AppendEndChunk(out, TraceEnd{t.snapshots.empty() ? t.start_ns : t.snapshots.back().first});
  return out;
}

std::string WriteTimelineTrace(const std::string& name, const TimelineHandMadeTrace& t) {
  std::string path = testing::TempTracePath(name);
  testing::WriteFileBytes(path, TimelineTraceBytes(t));
  return path;
}

// A consumer (main) and a producer (worker), 50 ms apart on one host; their
// realtime starts disagree on purpose, so that using them would show.
std::pair<TimelineHandMadeTrace, TimelineHandMadeTrace> TimelineMainAndWorker() {
  TimelineHandMadeTrace main{100,
                             "host-a",
                             1000 * kTlMs,
                             7'000 * kTlMs,
                             "next",
                             {{1050 * kTlMs, 1060 * kTlMs}},
                             {{1100 * kTlMs, 0}, {1300 * kTlMs, 2}}};
  TimelineHandMadeTrace worker{200,
                               "host-a",
                               1050 * kTlMs,
                               1 * kTlMs,
                               "collate",
                               {{1100 * kTlMs, 1120 * kTlMs}},
                               {{1200 * kTlMs, 3}, {1400 * kTlMs, 4}}};
  return {main, worker};
}

Json ExportTimelineOrFail(const std::vector<ChromeTimelineTrace>& traces,
                          const std::vector<ChromeTimelineQueue>& queues, ChromeTimelineStats* stats) {
  std::ostringstream out;
  Status s = ExportChromeTimeline(traces, queues, out, {}, stats);
  EXPECT_TRUE(s.ok()) << s.message();
  Json doc = Json::parse(out.str(), nullptr, /*allow_exceptions=*/false);
  EXPECT_FALSE(doc.is_discarded()) << out.str().substr(0, 2000);
  return doc;
}

// The "X" slices' start times by pid.
std::map<int64_t, std::vector<double>> TimelineSliceStarts(const Json& doc) {
  std::map<int64_t, std::vector<double>> starts;
  for (const Json& e : doc["traceEvents"]) {
    if (e["ph"] == "X") starts[e["pid"].get<int64_t>()].push_back(e["ts"].get<double>());
  }
  return starts;
}

std::map<int64_t, std::string> TimelineProcessNames(const Json& doc) {
  std::map<int64_t, std::string> names;
  for (const Json& e : doc["traceEvents"]) {
    if (e["ph"] == "M" && e["name"] == "process_name") names[e["pid"]] = e["args"]["name"];
  }
  return names;
}

TEST(ChromeTimeline, OneHostSharesTheMonotonicClockAndTheQueueIsProducedMinusTaken) {
  auto [main, worker] = TimelineMainAndWorker();
  std::vector<ChromeTimelineTrace> traces{{WriteTimelineTrace("tl_main", main), "main"},
                                          {WriteTimelineTrace("tl_worker", worker), "worker"}};
  ChromeTimelineQueue queue{"batches in flight", "batches", {{1, "collate"}}, {0, "next"}};
  ChromeTimelineStats stats;
  Json doc = ExportTimelineOrFail(traces, {queue}, &stats);

  EXPECT_EQ(doc["otherData"]["clock"], "CLOCK_MONOTONIC");
  EXPECT_TRUE(stats.warnings.empty());
  ASSERT_EQ(stats.events_per_trace.size(), 2u);
  EXPECT_GT(stats.events_per_trace[1], 0u);
  EXPECT_EQ(TimelineProcessNames(doc),
            (std::map<int64_t, std::string>{{100, "main (pid 100)"}, {200, "worker (pid 200)"}}));
  // Microseconds since the earlier start (the main's, at 1000 ms).
  auto starts = TimelineSliceStarts(doc);
  EXPECT_EQ(starts[100], std::vector<double>{50'000.0});
  EXPECT_EQ(starts[200], std::vector<double>{100'000.0});

  std::vector<std::pair<double, int>> depth;
  for (const Json& e : doc["traceEvents"]) {
    if (e["ph"] == "C" && e["name"] == "batches in flight") {
      EXPECT_EQ(e["pid"], 100);
      depth.emplace_back(e["ts"].get<double>(), e["args"]["batches"].get<int>());
    }
  }
  // main took 0 then 2; the worker had collated 3 then 4.
  std::vector<std::pair<double, int>> expected{
      {100'000.0, 0}, {200'000.0, 3}, {300'000.0, 1}, {400'000.0, 2}};
  EXPECT_EQ(depth, expected);
}

TEST(ChromeTimeline, SeveralHostsMeetOnTheRealtimeClock) {
  auto [main, worker] = TimelineMainAndWorker();
  worker.host = "host-b";
  worker.pid = 100;  // the same pid on another host: still two processes
  main.start_unix_ns = 1'700'000'000'000 * kTlMs;
  worker.start_unix_ns = main.start_unix_ns + 20 * kTlMs;  // worker's span: 50 ms after its start
  Json doc = ExportTimelineOrFail(
      {{WriteTimelineTrace("rt_main", main), "rank 0"}, {WriteTimelineTrace("rt_worker", worker), "rank 1"}},
      {}, nullptr);
  EXPECT_EQ(doc["otherData"]["clock"], "CLOCK_REALTIME");
  auto names = TimelineProcessNames(doc);
  ASSERT_EQ(names.size(), 2u);
  EXPECT_EQ(names[100], "rank 0 (pid 100)");
  auto starts = TimelineSliceStarts(doc);
  ASSERT_EQ(starts.size(), 2u);
  EXPECT_EQ(starts[100], std::vector<double>{50'000.0});
  for (const auto& [pid, ts] : starts) {
    if (pid != 100) {
      EXPECT_EQ(names[pid], "rank 1 (pid 100)");
      EXPECT_EQ(ts, std::vector<double>{70'000.0});
    }
  }
}

TEST(ChromeTimeline, AnUnreadableOrTruncatedLaterTraceIsAWarning) {
  auto [main, worker] = TimelineMainAndWorker();
  std::string main_path = WriteTimelineTrace("bad_main", main);
  std::string missing = testing::TempTracePath("bad_missing");
  std::string truncated = testing::TempTracePath("bad_truncated");
  std::string bytes = TimelineTraceBytes(worker);
  testing::WriteFileBytes(truncated, bytes.substr(0, bytes.size() - 5));
  ChromeTimelineStats stats;
  Json doc = ExportTimelineOrFail({{main_path, "main"}, {missing, "gone"}, {truncated, "cut"}}, {}, &stats);
  ASSERT_EQ(stats.warnings.size(), 2u);
  EXPECT_NE(stats.warnings[0].find(missing), std::string::npos) << stats.warnings[0];
  EXPECT_NE(stats.warnings[1].find("truncated"), std::string::npos) << stats.warnings[1];
  EXPECT_EQ(stats.events_per_trace[1], 0u);
  EXPECT_EQ(TimelineSliceStarts(doc)[200], std::vector<double>{100'000.0});  // read to its last whole chunk
  EXPECT_NE(doc["otherData"]["trace_warning"].get<std::string>().find(missing), std::string::npos);
}

TEST(ChromeTimeline, AnUnreadableFirstTraceIsAnErrorAndWritesNothing) {
  std::ostringstream out;
  Status s = ExportChromeTimeline({{testing::TempTracePath("first_missing"), "main"}}, {}, out);
  EXPECT_FALSE(s.ok());
  EXPECT_TRUE(out.str().empty());
  EXPECT_FALSE(ExportChromeTimeline({}, {}, out).ok());
}

}  // namespace
}  // namespace pipetune::tracer

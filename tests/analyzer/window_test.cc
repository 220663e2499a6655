// Which stretch of a run the model measures, and what it measures there.
#include "pipetune/analyzer/window.h"

#include <gtest/gtest.h>

#include "synthetic_trace.h"

namespace pipetune::analyzer {
namespace {

using testing::Collect;
using testing::SyntheticRun;

SyntheticRun Simple(double seconds) {
  SyntheticRun run;
  run.seconds = seconds;
  run.start_seconds = 0.05;
  run.stages = {{"src", "range", 1, 1, 0, 1e-6, 1e-6}, {"work", "map", 1, 1, 1, 0.005, 0.005}};
  return run;
}

Window SelectOrDie(const CollectedTrace& trace, const models::PipelineConfig* config = nullptr) {
  StatusOr<Window> window = SelectWindow(trace, config);
  EXPECT_TRUE(window.ok()) << window.status().message();
  return *window;
}

TEST(SelectWindow, SkipsTenPercentAndAtLeastASecondOrAQuarter) {
  EXPECT_NEAR(SelectOrDie(Collect(Simple(100))).begin_seconds, 10.0, 0.11);
  EXPECT_NEAR(SelectOrDie(Collect(Simple(10))).begin_seconds, 1.0, 0.11);
  EXPECT_NEAR(SelectOrDie(Collect(Simple(2))).begin_seconds, 0.5, 0.11);
  Window w = SelectOrDie(Collect(Simple(10)));
  EXPECT_NEAR(w.end_seconds, 10.0, 1e-9);
  EXPECT_NE(w.reason.find("warm-up"), std::string::npos) << w.reason;
}

TEST(SelectWindow, EndsAtTheConsumersLastStep) {
  SyntheticRun run = Simple(10);
  run.consumer_stop_seconds = 7.0;
  Window w = SelectOrDie(Collect(run));
  EXPECT_NEAR(w.end_seconds, 7.0, 0.11);
  EXPECT_NE(w.reason.find("last step"), std::string::npos) << w.reason;
}

TEST(SelectWindow, ACacheFilledTooLateMeansTheFirstEpochIsMeasured) {
  StatusOr<models::PipelineConfig> config = models::ParseConfig(R"({"name": "c", "stages": [
    {"name": "src", "op": "range", "args": {"count": 100}},
    {"name": "work", "op": "map", "fn": "cpu_work", "args": {"us": 5000}},
    {"name": "cache", "op": "cache"},
    {"name": "again", "op": "repeat"}]})");
  ASSERT_TRUE(config.ok()) << config.status().message();
  SyntheticRun run = Simple(10);
  run.stages = {{"src", "range", 1, 1, 0, 1e-6, 1e-6, 100, 9.7},
                {"work", "map", 1, 1, 1, 0.005, 0.005, 100, 9.7},
                {"cache", "cache", 1, 1, 1, 1e-6, 1e-6},
                {"again", "repeat", 1, 1, 1, 1e-6, 1e-6}};
  Window w = SelectOrDie(Collect(run), &*config);
  EXPECT_FALSE(w.cache_filled);
  EXPECT_LT(w.end_seconds, 9.7);
  EXPECT_NE(w.reason.find("first epoch"), std::string::npos) << w.reason;
}

TEST(SelectWindow, OneSnapshotIsAnError) {
  SyntheticRun run = Simple(0.1);
  StatusOr<Window> w = SelectWindow(Collect(run), nullptr);
  ASSERT_FALSE(w.ok());
  EXPECT_NE(w.status().message().find("too short"), std::string::npos);
}

TEST(MeasureWindow, CountsTheDifferencesBetweenItsFrames) {
  SyntheticRun run = Simple(10);
  run.throughput = 100;
  CollectedTrace trace = Collect(run);
  Window w = SelectOrDie(trace);
  models::WindowMeasurement m = MeasureWindow(trace, w, nullptr);
  double seconds = w.end_seconds - w.begin_seconds;
  ASSERT_EQ(m.stages.size(), 2u);
  EXPECT_NEAR(m.outputs / seconds, 100, 1);
  EXPECT_NEAR(m.stages[1].elements / seconds, 100, 1);
  EXPECT_NEAR(m.stages[1].cpu_seconds / m.stages[1].elements, 0.005, 1e-5);
  EXPECT_NEAR(m.process_cpu_seconds, m.stages[0].cpu_seconds + m.stages[1].cpu_seconds + 0.01 * seconds,
              1e-3);
  EXPECT_EQ(m.host_cores, 2);
  EXPECT_FALSE(m.source_elements_per_epoch);
}

TEST(MeasureWindow, AParallelismChangeInTheTraceBecomesAScalingPoint) {
  TraceCollector collector;
  tracer::TraceHeader header;
  header.host.cores_allowed = 8;
  collector.OnHeader(header);
  collector.OnStage({7, "work", "map", 1});
  uint64_t produced = 0, work_ns = 0;
  for (int k = 1; k <= 100; ++k) {
    // 1 worker at 10 ms per element for 5 s, then 2 workers at 12.5 ms each.
    bool late = k > 50;
    uint32_t workers = late ? 2 : 1;
    uint64_t per_interval = late ? 16 : 10;  // elements per 100 ms
    produced += per_interval;
    work_ns += per_interval * (late ? 12'500'000 : 10'000'000);
    tracer::StageSnapshot s;
    s.time_ns = static_cast<uint64_t>(k) * 100'000'000;
    s.stage = 7;
    s.parallelism = workers;
    s.produced = produced;
    s.consumed = produced;
    s.cpu_ns = work_ns;
    s.work_ns = work_ns;
    collector.OnSnapshot(s);
  }
  CollectedTrace trace = collector.Finish({});
  Window w;
  w.begin_frame = 0;
  w.end_frame = trace.frames.size() - 1;
  w.begin_seconds = 0.1;
  w.end_seconds = 10;
  StatusOr<Window> selected = SelectWindow(trace, nullptr);
  ASSERT_TRUE(selected.ok());
  EXPECT_NEAR(selected->begin_seconds, 5.1, 1e-9);  // the last level only
  EXPECT_NE(selected->reason.find("parallelism"), std::string::npos) << selected->reason;
  models::WindowMeasurement m = MeasureWindow(trace, w, nullptr);
  EXPECT_EQ(m.stages[0].parallelism, 2);
  ASSERT_EQ(m.stages[0].scaling_points.size(), 1u);
  EXPECT_EQ(m.stages[0].scaling_points[0].parallelism, 1);
  EXPECT_NEAR(m.stages[0].scaling_points[0].throughput, 100, 1e-6);
}

}  // namespace
}  // namespace pipetune::analyzer

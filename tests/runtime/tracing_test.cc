// A traced run: what the runtime reports through the tracer's public API
// reads back from the trace file and agrees with the run's own summary.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>

#include "pipetune/tracer/reader.h"
#include "pipetune/tracer/tracer.h"
#include "test_util.h"

namespace pipetune::runtime::test {
namespace {

TEST(TracingTest, EveryStageWorkerAndConsumerStepIsInTheTrace) {
  auto config = Config(R"({"name": "traced", "stages": [
      {"name": "src", "op": "range", "args": {"count": 2000, "bytes": 100}},
      {"name": "work", "op": "map", "fn": "cpu_work", "args": {"us": 50}, "parallelism": 2},
      {"name": "batch", "op": "batch", "args": {"size": 10}},
      {"name": "prefetch", "op": "prefetch", "buffer": 2}],
      "consumer": {"step_time_ms": 0.1}})");
  std::string path = TempDir("trace") + "/run.trace";
  tracer::SessionOptions session;
  session.path = path;
  session.pipeline_name = config.name;
  session.config_json = models::Serialize(config);
  session.snapshot_interval_ms = 20;
  ASSERT_TRUE(tracer::Start(session).ok());
  auto summary = RunPipeline(config);
  ASSERT_TRUE(tracer::Stop().ok());
  ASSERT_TRUE(summary.ok()) << summary.status().message();

  auto trace = tracer::LoadTrace(path);
  ASSERT_TRUE(trace.ok()) << trace.status().message();
  EXPECT_EQ(trace->header.pipeline.name, "traced");

  // The stages of this run: the last registered under each name (earlier
  // tests in this process registered stages with the same names).
  std::map<std::string, const tracer::StageDef*> stages;
  for (const tracer::StageDef& stage : trace->stages) stages[stage.name] = &stage;
  for (const StageSummary& expected : summary->stages) {
    ASSERT_TRUE(stages.count(expected.name)) << expected.name;
    const tracer::StageDef* stage = stages[expected.name];
    EXPECT_EQ(stage->op, expected.op);
    const tracer::StageSnapshot* last = trace->LastSnapshot(stage->id);
    ASSERT_NE(last, nullptr) << expected.name;
    EXPECT_EQ(last->produced, expected.elements) << expected.name;
    EXPECT_EQ(last->consumed, expected.consumed) << expected.name;
    EXPECT_EQ(last->bytes_produced, expected.bytes) << expected.name;
    int workers = 0;
    for (const tracer::WorkerDef& worker : trace->workers) workers += worker.stage == stage->id;
    EXPECT_EQ(workers, expected.parallelism) << expected.name;
  }
  const tracer::StageSnapshot* work = trace->LastSnapshot(stages["work"]->id);
  EXPECT_EQ(work->produced, 2000u);
  EXPECT_EQ(work->bytes_produced, 2000u * 100u);
  EXPECT_GE(work->cpu_ns, 2000u * 50'000u * 8 / 10) << "the workers' CPU is the work's";
  EXPECT_GE(work->work_ns, 2000u * 50'000u * 8 / 10);
  int work_spans = 0;
  for (const tracer::SpanRecord& span : trace->spans) work_spans += span.stage == stages["work"]->id;
  EXPECT_GT(work_spans, 0);
  ASSERT_FALSE(trace->consumer_totals.empty());
  EXPECT_EQ(trace->consumer_totals.back().steps, 200u);
}

}  // namespace
}  // namespace pipetune::runtime::test

// Is the GPU waiting for data: busy fraction as the union of work per
// device, idle gaps split into input stalls (the consumer's waits, or, with
// no consumer recorded, gaps ended by a host-to-device copy) and the rest,
// the verdict, and every report format saying it.
#include "pipetune/analyzer/gpu.h"

#include <gtest/gtest.h>

#include "pipetune/analyzer/diagnosis.h"
#include "pipetune/analyzer/report.h"
#include "pipetune/base/json.h"
#include "synthetic_trace.h"

namespace pipetune::analyzer {
namespace {

constexpr uint64_t kMs = 1000000;

GpuInterval Work(uint32_t device, uint64_t start_ms, uint64_t end_ms, bool h2d = false) {
  return GpuInterval{device, start_ms * kMs, end_ms * kMs, h2d};
}

TEST(GpuAnalysis, BusyIsTheUnionOfOverlappingStreamsPerDevice) {
  GpuAnalysisInput in;
  in.begin_ns = 0;
  in.end_ns = 200 * kMs;
  in.work = {Work(0, 0, 60), Work(0, 40, 100),  // two streams overlapping: 100 ms busy, not 120
             Work(1, 0, 200)};                  // another device, always busy
  GpuAnalysis a = AnalyzeGpu(in);
  ASSERT_EQ(a.devices.size(), 2u);
  EXPECT_DOUBLE_EQ(a.devices[0].busy_fraction, 0.5);
  EXPECT_DOUBLE_EQ(a.devices[1].busy_fraction, 1.0);
  EXPECT_DOUBLE_EQ(a.busy_fraction, 0.75);
  EXPECT_DOUBLE_EQ(a.idle_seconds, 0.1);
}

TEST(GpuAnalysis, ConsumerWaitsInsideGapsAreInputStallsAndTheRestIsOther) {
  GpuAnalysisInput in;
  in.begin_ns = 0;
  in.end_ns = 500 * kMs;
  in.consumer_recorded = true;
  in.work = {Work(0, 0, 100), Work(0, 150, 250), Work(0, 400, 500)};
  // The whole first gap, a third of the second (and a wait outside any gap).
  in.consumer_waits = {{100 * kMs, 150 * kMs}, {250 * kMs, 300 * kMs}, {10 * kMs, 20 * kMs}};
  GpuAnalysis a = AnalyzeGpu(in);
  EXPECT_FALSE(a.inferred);
  EXPECT_EQ(a.gaps, 2u);
  EXPECT_EQ(a.input_stall_gaps, 2u);
  EXPECT_NEAR(a.idle_seconds, 0.2, 1e-12);
  EXPECT_NEAR(a.input_stall_seconds, 0.1, 1e-12);
  EXPECT_NEAR(a.other_idle_seconds, 0.1, 1e-12);
  EXPECT_NEAR(a.input_stall_share, 0.5, 1e-12);
  EXPECT_EQ(a.verdict, GpuVerdict::kInputStalled);
  EXPECT_NE(GpuVerdictSentence(a).find("tuning the input pipeline can help"), std::string::npos);
}

TEST(GpuAnalysis, WithoutAConsumerGapsEndedByAHostToDeviceCopyAreInferredStalls) {
  GpuAnalysisInput in;
  in.begin_ns = 0;
  in.end_ns = 400 * kMs;
  in.work = {Work(0, 0, 100), Work(0, 200, 210, /*h2d=*/true),
             Work(0, 210, 300),   // 100 ms gap, then the next batch arrives
             Work(0, 320, 400)};  // 20 ms gap ended by a kernel
  GpuAnalysis a = AnalyzeGpu(in);
  EXPECT_TRUE(a.inferred);
  EXPECT_EQ(a.gaps, 2u);
  EXPECT_EQ(a.input_stall_gaps, 1u);
  EXPECT_NEAR(a.input_stall_seconds, 0.1, 1e-12);
  EXPECT_NEAR(a.other_idle_seconds, 0.02, 1e-12);
  EXPECT_NE(GpuVerdictSentence(a).find("inferred"), std::string::npos);
}

TEST(GpuAnalysis, ABusyGpuIsToldTuningTheInputCannotHelp) {
  GpuAnalysisInput in;
  in.begin_ns = 0;
  in.end_ns = 100 * kMs;
  in.consumer_recorded = true;
  in.work = {Work(0, 0, 96)};
  in.consumer_waits = {{96 * kMs, 100 * kMs}};  // all of its little idle time is input
  GpuAnalysis a = AnalyzeGpu(in);
  EXPECT_EQ(a.verdict, GpuVerdict::kGpuBound);
  EXPECT_NE(GpuVerdictSentence(a).find("cannot speed training up"), std::string::npos);
}

TEST(GpuAnalysis, IdleForOtherReasonsIsNotBlamedOnTheInput) {
  GpuAnalysisInput in;
  in.begin_ns = 0;
  in.end_ns = 100 * kMs;
  in.consumer_recorded = true;
  in.work = {Work(0, 0, 30), Work(0, 60, 90)};
  GpuAnalysis a = AnalyzeGpu(in);
  EXPECT_EQ(a.verdict, GpuVerdict::kOtherIdle);
  EXPECT_DOUBLE_EQ(a.input_stall_share, 0.0);
  EXPECT_NE(GpuVerdictSentence(a).find("helps little"), std::string::npos);
}

TEST(GpuAnalysis, NoWorkIsNoActivity) {
  GpuAnalysisInput in;
  in.end_ns = kMs;
  EXPECT_EQ(AnalyzeGpu(in).verdict, GpuVerdict::kNoActivity);
}

// A run whose consumer waits half of the time, with a GPU busy between waits.
Diagnosis InputStalledDiagnosis() {
  testing::SyntheticRun run;
  run.name = "gpu";
  run.stages = {{"src", "range", 1, 1, 0, 1e-6, 1e-6}, {"decode", "map", 1, 1, 1, 0.010, 0.010}};
  run.throughput = 50;
  run.step_seconds = 0.010;
  CollectedTrace trace = testing::Collect(run);
  trace.consumer_step_records = 1000;
  // Every 20 ms from 1 s to 10 s: 10 ms of waiting, then 10 ms of kernel.
  for (uint64_t t = 1000; t < 10000; t += 20) {
    trace.consumer_waits.emplace_back(t * kMs, (t + 10) * kMs);
    trace.gpu_work.push_back(Work(0, t + 10, t + 20));
  }
  trace.gpu_records = trace.gpu_work.size();
  trace.gpu_status = tracer::GpuStatus{};
  trace.gpu_status->state = tracer::GpuState::kStopped;
  StatusOr<Diagnosis> d = Diagnose(trace, "gpu.trace");
  EXPECT_TRUE(d.ok()) << d.status().message();
  return d.ok() ? *d : Diagnosis{};
}

TEST(GpuReport, EveryFormatSaysTheInputStallShareAndWhetherTuningHelps) {
  Diagnosis d = InputStalledDiagnosis();
  ASSERT_TRUE(d.gpu.has_value());
  EXPECT_NEAR(d.gpu->busy_fraction, 0.5, 0.02);
  EXPECT_GT(d.gpu->analysis.input_stall_share, 0.95);
  EXPECT_EQ(d.gpu->analysis.verdict, GpuVerdict::kInputStalled);
  for (ReportFormat format : {ReportFormat::kText, ReportFormat::kMarkdown, ReportFormat::kHtml}) {
    std::string out = RenderReport(d, format);
    EXPECT_NE(out.find("input stalls 100% of the idle time"), std::string::npos) << out;
    EXPECT_NE(out.find("tuning the input pipeline can help"), std::string::npos) << out;
  }
  Json j = Json::parse(RenderReport(d, ReportFormat::kJson));
  EXPECT_EQ(j["gpu"]["verdict"], "input_stalled");
  EXPECT_EQ(j["gpu"]["tuning_input_can_help"], true);
  EXPECT_GT(j["gpu"]["input_stall_share"].get<double>(), 0.95);
  EXPECT_EQ(j["gpu"]["input_stall_inferred"], false);
}

TEST(GpuReport, ATraceWithoutAGpuSaysWhy) {
  testing::SyntheticRun run;
  run.stages = {{"src", "range", 1, 1, 0, 1e-6, 1e-6}};
  CollectedTrace trace = testing::Collect(run);
  trace.gpu_status = tracer::GpuStatus{};
  trace.gpu_status->state = tracer::GpuState::kNoGpu;
  trace.gpu_status->message = "no GPU found: no NVIDIA driver";
  StatusOr<Diagnosis> d = Diagnose(trace, "cpu.trace");
  ASSERT_TRUE(d.ok()) << d.status().message();
  EXPECT_NE(RenderReport(*d, ReportFormat::kText).find("no GPU activity recorded: no GPU found"),
            std::string::npos);
  Json j = Json::parse(RenderReport(*d, ReportFormat::kJson));
  EXPECT_EQ(j["gpu"]["status"], "no_gpu");
  EXPECT_EQ(j["gpu"]["verdict"], "no_activity");
}

}  // namespace
}  // namespace pipetune::analyzer

namespace pipetune::analyzer {
namespace {

TEST(GpuReport, AProgramWithoutAPipelineGetsAGpuOnlyReport) {
  CollectedTrace trace;  // what the injection library's session leaves: no stages, GPU activity
  trace.header.pipeline.name = "train.py";
  for (uint64_t t = 0; t < 1000; t += 100) {
    trace.gpu_work.push_back(Work(0, t + 40, t + 50, /*h2d=*/true));  // 40 ms waiting for the batch
    trace.gpu_work.push_back(Work(0, t + 50, t + 100));
  }
  trace.gpu_records = trace.gpu_work.size();
  trace.end_ns = 1000 * kMs;
  StatusOr<Diagnosis> d = Diagnose(trace, "train.trace");
  ASSERT_TRUE(d.ok()) << d.status().message();
  ASSERT_TRUE(d->gpu.has_value());
  EXPECT_NEAR(d->gpu->busy_fraction, 0.6, 1e-9);
  EXPECT_TRUE(d->gpu->analysis.inferred);
  EXPECT_EQ(d->gpu->analysis.verdict, GpuVerdict::kInputStalled);
  std::string text = RenderReport(*d, ReportFormat::kText);
  EXPECT_NE(text.find("No input pipeline recorded"), std::string::npos) << text;
  EXPECT_EQ(text.find("throughput"), std::string::npos) << text;  // nothing to rate
}

}  // namespace
}  // namespace pipetune::analyzer

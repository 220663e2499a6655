// The one model and the one report on the golden DataLoader traces
// (tests/analyzer/dataloader_golden/, recorded by the Python bootstrap from
// real DataLoaders; see its README): a DataLoader run is stages of the rate
// model, diagnosed, asked what-ifs and reported like a config's run. These
// run where torch is absent; tests/python runs live DataLoaders.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <regex>
#include <string>

#include "pipetune/analyzer/dataloader_model.h"
#include "pipetune/analyzer/report.h"
#include "pipetune/base/json.h"

namespace pipetune::analyzer {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

std::string GoldenPath(const std::string& name) {
  return std::string(PIPETUNE_SOURCE_DIR) + "/tests/analyzer/dataloader_golden/" + name + "/trace";
}

Diagnosis DiagnoseGolden(const std::string& name, const std::vector<std::string>& what_ifs = {}) {
  StatusOr<DataLoaderProfile> run = ReadDataLoaderProfile(GoldenPath(name));
  EXPECT_TRUE(run.ok()) << run.status().message();
  if (!run.ok()) return {};
  DiagnoseOptions options;
  options.what_ifs = what_ifs;
  StatusOr<Diagnosis> d = DiagnoseDataLoader(*run, options);
  EXPECT_TRUE(d.ok()) << d.status().message();
  return d.ok() ? *d : Diagnosis{};
}

// The goldens ran on a busy 2-core host, so the bound is wider than the
// benchmark's (bench/pytorch/model_accuracy.py measures the 5%).
void ExpectPredictsWhatRan(const Diagnosis& d) {
  EXPECT_GT(d.measured_throughput, 0);
  EXPECT_GT(d.prediction_ratio, 0.75) << d.summary;
  EXPECT_LT(d.prediction_ratio, 1.33) << d.summary;
}

TEST(DataLoaderReport, ZeroWorkersRunsOnTheConsumersThreadAndBlamesTheInputSide) {
  Diagnosis d = DiagnoseGolden("map_workers0");
  ExpectPredictsWhatRan(d);
  // Per batch of 4: samples cost 4 x 4.5 ms against a 4 ms step.
  EXPECT_EQ(d.bound, models::BoundKind::kConsumer);
  ASSERT_TRUE(d.bottleneck.has_value());
  EXPECT_EQ(*d.bottleneck, "load");
  for (const StageDiagnosis& s : d.stages) {
    if (s.name == "pin_memory") continue;
    EXPECT_EQ(s.runs_on, "consumer") << s.name;
  }
  EXPECT_THAT(d.summary, HasSubstr("num_workers="));
  // It names what the thread runs: the samples' stages and collate; no
  // transfer, since without workers there is nothing to unpickle.
  EXPECT_THAT(d.summary, HasSubstr("it runs load, transform[0]"));
  EXPECT_THAT(d.summary, Not(HasSubstr("transfer")));
}

TEST(DataLoaderReport, WorkersAreOneGroupAndTheirStagesShareItsBound) {
  Diagnosis d = DiagnoseGolden("map_workers2_fork");
  ExpectPredictsWhatRan(d);
  double group_bound = -1;
  for (const StageDiagnosis& s : d.stages) {
    if (s.runs_on != "workers") continue;
    EXPECT_EQ(s.parallelism, 2) << s.name;
    if (group_bound < 0) group_bound = s.max_throughput;
    EXPECT_DOUBLE_EQ(s.max_throughput, group_bound) << s.name;
  }
  EXPECT_GT(group_bound, 0);
  ASSERT_TRUE(d.dataloader.has_value());
  EXPECT_EQ(d.dataloader->settings.num_workers, 2);
  EXPECT_EQ(d.dataloader->worker_traces, 2);
}

TEST(DataLoaderReport, WhatIfNumWorkersAnswersFromTheSameModel) {
  Diagnosis d = DiagnoseGolden("map_workers0", {"num_workers=2", "num_workers=2,cores=8", "pin_memory=true"});
  ASSERT_EQ(d.what_ifs.size(), 3u);
  // The input side was most of each batch; the golden's epochs are 4 batches,
  // so the workers' start-up and each epoch's fill and drain (2 of its 4
  // batches arrive side by side) take much of the gain.
  EXPECT_GT(d.what_ifs[0].speedup, 1.1);
  EXPECT_GE(d.what_ifs[1].throughput, d.what_ifs[0].throughput);
  EXPECT_LE(d.what_ifs[2].speedup, 1.0);  // pinning only adds work (little: the batches are small)
}

// A damaged trace's memory samples can sum past 2^64 bytes; the report
// saturates instead of converting out of range (undefined behaviour, which
// the sanitizer build reports; found by fuzz/trace_analysis_fuzz.cc).
TEST(DataLoaderReport, MemoryPastTwoToTheSixtyFourIsSaturated) {
  StatusOr<DataLoaderProfile> run = ReadDataLoaderProfile(GoldenPath("map_workers0"));
  ASSERT_TRUE(run.ok()) << run.status().message();
  run->main_rss_bytes = 18446744073709551615.0;  // 2^64, as a double
  StatusOr<Diagnosis> d = DiagnoseDataLoader(*run);
  ASSERT_TRUE(d.ok()) << d.status().message();
  EXPECT_EQ(d->peak_rss_bytes, static_cast<uint64_t>(1.8e19));
}

TEST(DataLoaderReport, AKnobThePipelineDoesNotHaveIsRefused) {
  StatusOr<DataLoaderProfile> run = ReadDataLoaderProfile(GoldenPath("map_workers0"));
  ASSERT_TRUE(run.ok());
  DiagnoseOptions options;
  options.what_ifs = {"decode.parallelism=2"};
  StatusOr<Diagnosis> d = DiagnoseDataLoader(*run, options);
  ASSERT_FALSE(d.ok());
  EXPECT_THAT(d.status().message(), HasSubstr("no stage \"decode\""));
}

TEST(DataLoaderReport, IterableStreamsAreModelledAndAnUnshardedOneIsCalledOut) {
  ExpectPredictsWhatRan(DiagnoseGolden("iterable_workers0"));
  Diagnosis sharded = DiagnoseGolden("iterable_workers2");
  ExpectPredictsWhatRan(sharded);
  ASSERT_TRUE(sharded.dataloader.has_value());
  EXPECT_TRUE(sharded.dataloader->settings.iterable);
  for (const std::string& note : sharded.dataloader->notes) EXPECT_THAT(note, Not(HasSubstr("not sharded")));
  Diagnosis unsharded = DiagnoseGolden("iterable_workers2_unsharded");
  ASSERT_TRUE(unsharded.dataloader.has_value());
  EXPECT_THAT(::testing::PrintToString(unsharded.dataloader->notes), HasSubstr("not sharded"));
}

TEST(DataLoaderReport, AKilledRunReportsWhatItRecorded) {
  Diagnosis d = DiagnoseGolden("killed");
  EXPECT_FALSE(d.ended_cleanly);
  ASSERT_TRUE(d.dataloader.has_value());
  EXPECT_GT(d.dataloader->batches, 0u);
  EXPECT_GT(d.measured_throughput, 0);
}

// The SVG of the chart titled `title` in `html`; empty when there is none.
std::string Chart(const std::string& html, const std::string& title) {
  size_t at = html.find("aria-label=\"" + title + "\"");
  if (at == std::string::npos) return "";
  size_t begin = html.rfind("<svg", at);
  size_t end = html.find("</svg>", at);
  return end == std::string::npos ? "" : html.substr(begin, end - begin);
}

size_t Count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

// The points of the line drawn in `color` ("M x,y L x,y ...").
size_t LinePoints(const std::string& svg, const std::string& color) {
  size_t at = svg.find("fill=\"none\" stroke=\"" + color + "\"");
  if (at == std::string::npos) return 0;
  size_t d = svg.rfind(" d=\"", at);
  return Count(svg.substr(d, at - d), ",");
}

// A DataLoader run's report has a config's time charts: the throughput,
// the consumer's wait and every stage's busy share over time, one point per
// stretch of the main process's snapshots, the workers' stages from their
// own traces.
TEST(DataLoaderReport, TheTimeChartsDrawTheRunOverTime) {
  for (const char* name : {"map_workers0", "map_workers2_fork", "killed"}) {
    SCOPED_TRACE(name);
    StatusOr<DataLoaderProfile> run = ReadDataLoaderProfile(GoldenPath(name));
    ASSERT_TRUE(run.ok());
    Diagnosis d = DiagnoseGolden(name);
    // Few batches a snapshot: a point per snapshot interval.
    ASSERT_EQ(d.timeline.size(), run->timeline.frames.size() - 1);
    // Summed over the points, the rates give back the loop's batches and
    // most of its waits (a wait counts when it ends: one that began in an
    // earlier interval can fill this one, and the share stops at 100%).
    double batches = 0, wait = 0, peak_busy = 0;
    double previous = static_cast<double>(run->timeline.frames.front().time_ns) / 1e9;
    for (const TimelinePoint& p : d.timeline) {
      ASSERT_EQ(p.stage_busy.size(), d.stages.size());
      batches += p.throughput * (p.seconds - previous);
      wait += p.stall_fraction * (p.seconds - previous);
      previous = p.seconds;
      peak_busy = std::max(peak_busy, p.stage_busy[0]);
      EXPECT_GE(p.cores_used, 0);
    }
    EXPECT_NEAR(batches, static_cast<double>(run->batches), 1e-6);
    EXPECT_LE(wait, run->wait_seconds + 1e-6);
    EXPECT_GT(wait, 0.6 * run->wait_seconds);
    EXPECT_GT(peak_busy, 0.2);  // load: 3 ms of every 4.5 ms of a sample
    // The window is where the loop ran, inside the trace; it holds the
    // loop's waits and steps (the measured time) and making its iterators.
    EXPECT_GT(d.window_begin_seconds, 0);
    EXPECT_GE(d.window_end_seconds - d.window_begin_seconds, d.profile.window_seconds - 1e-9);
    EXPECT_LE(d.window_end_seconds, d.trace_seconds);
    Json window = Json::parse(RenderReport(d, ReportFormat::kJson))["window"];
    EXPECT_NEAR(window["seconds"].get<double>(), d.profile.window_seconds, 1e-5);

    std::string html = RenderReport(d, ReportFormat::kHtml);
    std::string throughput = Chart(html, "Throughput over time");
    std::string stall = Chart(html, "Consumer stall over time (waiting for input)");
    std::string busy = Chart(html, "Per-stage busy share over time");
    EXPECT_EQ(LinePoints(throughput, "#2166ac"), d.timeline.size());
    EXPECT_EQ(LinePoints(stall, "#d6604d"), d.timeline.size());
    EXPECT_EQ(Count(busy, "<rect"), d.stages.size() * d.timeline.size());
    for (const StageDiagnosis& s : d.stages) EXPECT_THAT(busy, HasSubstr(">" + s.name));
  }
}

// Long stage names (torchvision's transforms) in the charts with a row per
// stage: the label column widens to fit them, up to 40% of the chart, and a
// name longer than that is shortened in its middle with the whole name as
// its tooltip. A fixed column had Chromium cut them from the left
// ("]:RandomResizedCrop"); report_in_browser.py measures it drawn.
TEST(DataLoaderReport, LongStageNamesFitTheChartsLabelColumn) {
  StatusOr<DataLoaderProfile> run = ReadDataLoaderProfile(GoldenPath("map_workers2_fork"));
  ASSERT_TRUE(run.ok());
  ASSERT_GE(run->sample_stages.size(), 3u);
  const std::string medium = "transform[0]:RandomResizedCrop";
  const std::string longest = "transform[1]:RandomResizedCropWithAnEvenLongerNameThanThat";
  run->sample_stages[1].name = medium;
  run->sample_stages[2].name = longest;
  StatusOr<Diagnosis> d = DiagnoseDataLoader(*run, {});
  ASSERT_TRUE(d.ok());
  std::string html = RenderReport(*d, ReportFormat::kHtml);
  const std::regex label(
      R"re(<text x="([0-9.]+)" y="[0-9.]+" font-size="11" text-anchor="end" fill="[^"]*">(?:<title>([^<]*)</title>)?([^<]*)</text>)re");
  for (const char* title :
       {"Per-stage busy share over time", "Per-stage utilisation in the window (share of worker time)"}) {
    SCOPED_TRACE(title);
    std::string chart = Chart(html, title);
    ASSERT_FALSE(chart.empty());
    bool saw_medium = false, saw_longest = false;
    for (auto it = std::sregex_iterator(chart.begin(), chart.end(), label); it != std::sregex_iterator();
         ++it) {
      const std::string shown = (*it)[3].str();
      size_t chars = 0;  // code points: the ellipsis is one
      for (unsigned char c : shown) chars += (c & 0xC0) != 0x80;
      // Right-aligned at x: the text needs x of room to its left (6.6 px a
      // character at 11 px, a little over the average of a sans-serif).
      EXPECT_GE(std::stod((*it)[1].str()), 6.6 * static_cast<double>(chars)) << shown;
      saw_medium |= shown.rfind(medium, 0) == 0;  // whole ("... *" marks the bottleneck)
      if ((*it)[2].matched && (*it)[2].str().rfind(longest, 0) == 0) {
        saw_longest = true;
        EXPECT_THAT(shown, HasSubstr("\xE2\x80\xA6"));   // shortened in the middle ...
        EXPECT_THAT(shown, HasSubstr("transform[1]:"));  // ... keeping its index
        EXPECT_THAT(shown, HasSubstr("ThanThat"));       // ... and its end
      }
    }
    EXPECT_TRUE(saw_medium);
    EXPECT_TRUE(saw_longest);
  }
}

TEST(DataLoaderReport, JsonIsTheOneSchemaWithTheDataLoadersSettingsAdded) {
  Diagnosis d = DiagnoseGolden("map_workers2_fork", {"num_workers=4"});
  Json j = Json::parse(RenderReport(d, ReportFormat::kJson));
  for (const char* key : {"schema_version", "throughput", "predicted_throughput", "bottleneck", "bound",
                          "stall_fraction", "stages", "what_if", "dataloader"}) {
    EXPECT_TRUE(j.contains(key)) << key;
  }
  EXPECT_FALSE(j.contains("limiting_stage"));
  EXPECT_EQ(j["dataloader"]["settings"]["num_workers"], 2);
  EXPECT_EQ(j["stages"][0]["name"], "load");
  EXPECT_EQ(j["stages"][0]["runs_on"], "workers");
  EXPECT_TRUE(j["what_if"][0]["throughput"].is_number());
  for (ReportFormat format : {ReportFormat::kText, ReportFormat::kMarkdown, ReportFormat::kHtml}) {
    std::string text = RenderReport(d, format);
    EXPECT_THAT(text, HasSubstr("num_workers=2"));
    EXPECT_THAT(text, HasSubstr("transform[0]:Spin"));
  }
}

// The whole process as `time` counts it, beside the loop's cores used: a
// line of its own where the recorder wrote it at the end, none where the
// trace does not say (every golden predates it).
TEST(DataLoaderReport, TheWholeProcessIsSaidBesideTheLoopsCoresWhereRecorded) {
  StatusOr<DataLoaderProfile> run = ReadDataLoaderProfile(GoldenPath("map_workers0"));
  ASSERT_TRUE(run.ok()) << run.status().message();
  EXPECT_FALSE(run->process_seconds.has_value());
  StatusOr<Diagnosis> without = DiagnoseDataLoader(*run, {});
  ASSERT_TRUE(without.ok()) << without.status().message();
  EXPECT_THAT(RenderReport(*without, ReportFormat::kText), Not(HasSubstr("from its start to its end")));
  EXPECT_TRUE(Json::parse(RenderReport(*without, ReportFormat::kJson))["dataloader"]["process"].is_null());

  run->process_seconds = 5.0;
  run->process_cpu_seconds = 7.0;
  StatusOr<Diagnosis> with = DiagnoseDataLoader(*run, {});
  ASSERT_TRUE(with.ok()) << with.status().message();
  EXPECT_THAT(RenderReport(*with, ReportFormat::kText),
              HasSubstr("process     1.40 cores over 5.0 s from its start to its end, as `time` counts it"));
  Json j = Json::parse(RenderReport(*with, ReportFormat::kJson));
  EXPECT_DOUBLE_EQ(j["dataloader"]["process"]["seconds"].get<double>(), 5.0);
  EXPECT_DOUBLE_EQ(j["dataloader"]["process"]["cpu_seconds"].get<double>(), 7.0);
}

}  // namespace
}  // namespace pipetune::analyzer

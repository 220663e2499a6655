// Every writer shows what a user needs; the HTML is self-contained.
#include "pipetune/analyzer/report.h"

#include <gtest/gtest.h>

#include <tuple>

#include "pipetune/base/json.h"
#include "synthetic_trace.h"

namespace pipetune::analyzer {
namespace {

Diagnosis SampleDiagnosis(uint64_t dropped_spans = 0) {
  testing::SyntheticRun run;
  run.name = "sample";
  run.config_json = R"({"name": "sample", "stages": [
    {"name": "src", "op": "range"},
    {"name": "decode", "op": "map", "fn": "cpu_work", "args": {"us": 10000}},
    {"name": "batch", "op": "batch", "args": {"size": 4}}]})";
  run.throughput = 25;
  run.dropped_spans = dropped_spans;
  run.stages = {{"src", "range", 1, 4, 0, 1e-6, 1e-6},
                {"decode", "map", 1, 4, 1, 0.010, 0.010},
                {"batch", "batch", 1, 1, 4, 1e-5, 1e-5, 4000}};
  DiagnoseOptions options;
  options.what_ifs = {"decode.parallelism=2"};
  StatusOr<Diagnosis> d = Diagnose(testing::Collect(run), "sample.trace", options);
  EXPECT_TRUE(d.ok()) << d.status().message();
  return *d;
}

// A trace's names are whatever bytes the traced program gave its tracer (a
// C++ program's Latin-1 string, say). The report is still written in every
// format: JSON with each bad byte replaced by U+FFFD, where the JSON writer
// threw and stopped `pipetune report` (found by fuzz/trace_analysis_fuzz.cc;
// its input is in tests/analyzer/regressions/).
TEST(Report, NamesThatAreNotUtf8AreWrittenInEveryFormat) {
  testing::SyntheticRun run;
  run.name = "caf\xe9 pipeline";  // Latin-1, as a C++ source file may hold it
  run.throughput = 25;
  run.stages = {{"src", "range", 1, 4, 0, 1e-6, 1e-6},
                {"d\xe9"
                 "code \xff",
                 "map", 1, 4, 1, 0.010, 0.010}};
  StatusOr<Diagnosis> d = Diagnose(testing::Collect(run), "latin1.trace");
  ASSERT_TRUE(d.ok()) << d.status().message();
  for (ReportFormat format : {ReportFormat::kText, ReportFormat::kMarkdown, ReportFormat::kHtml}) {
    EXPECT_FALSE(RenderReport(*d, format).empty());
  }
  const std::string text = RenderReport(*d, ReportFormat::kJson);
  Json j = Json::parse(text, nullptr, /*allow_exceptions=*/false);
  ASSERT_FALSE(j.is_discarded()) << text.substr(0, 400);
  EXPECT_NE(text.find("d\xef\xbf\xbd"
                      "code \xef\xbf\xbd"),
            std::string::npos);  // U+FFFD for each bad byte
}

// A pipeline using every core: the report names the fewest cores that reach
// (99% of) what more cores could give. Found by bisection, which a damaged
// trace claiming millions of cores made necessary (a scan took seconds;
// fuzz/trace_analysis_fuzz.cc): the counts are those a scan gives.
TEST(Report, ACpuBoundPipelineIsToldTheFewestCoresThatReachItsBest) {
  // {cores, decode workers, measured outputs/s, the answer}: 10 ms of CPU an
  // element, so the workers allow workers x 100/s and n cores n x 100/s.
  for (const auto& [cores, workers, rate, answer] :
       {std::tuple{2.0, 4u, 200.0, "4 cores"}, std::tuple{64.0, 200u, 6400.0, "199 cores"}}) {
    testing::SyntheticRun run;
    run.name = "cpu";
    run.cores = cores;
    run.throughput = rate;
    run.stages = {{"src", "range", 1, 1, 0, 1e-7, 1e-7}, {"decode", "map", workers, 1, 1, 0.010, 0.010}};
    StatusOr<Diagnosis> d = Diagnose(testing::Collect(run), "cpu.trace");
    ASSERT_TRUE(d.ok()) << d.status().message();
    const std::string text = RenderReport(*d, ReportFormat::kText);
    EXPECT_NE(text.find(std::string("; ") + answer + " would reach"), std::string::npos)
        << cores << " cores:\n"
        << text;
  }
}

TEST(Report, FormatsParse) {
  EXPECT_EQ(*ParseReportFormat("md"), ReportFormat::kMarkdown);
  EXPECT_EQ(*ParseReportFormat("html"), ReportFormat::kHtml);
  StatusOr<ReportFormat> bad = ParseReportFormat("pdf");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("pdf"), std::string::npos);
}

TEST(Report, TextMarksTheBottleneckAndSaysTheSentence) {
  Diagnosis d = SampleDiagnosis();
  std::string text = RenderReport(d, ReportFormat::kText);
  EXPECT_NE(text.find("> decode"), std::string::npos) << text;
  EXPECT_NE(text.find(d.summary), std::string::npos);
  EXPECT_NE(text.find("drops"), std::string::npos);
  EXPECT_NE(text.find("decode.parallelism=2"), std::string::npos);
}

TEST(Report, JsonHasTheDocumentedFields) {
  Diagnosis d = SampleDiagnosis(5);
  Json j = Json::parse(RenderReport(d, ReportFormat::kJson));
  EXPECT_EQ(j["schema_version"], kReportSchemaVersion);
  for (const char* key : {"throughput", "predicted_throughput", "bottleneck", "stall_fraction", "stages",
                          "window", "bound", "assumptions", "drops", "summary", "what_if"}) {
    EXPECT_TRUE(j.contains(key)) << key;
  }
  EXPECT_EQ(j["bottleneck"], "decode");
  EXPECT_EQ(j["drops"]["spans"], 5);
  ASSERT_EQ(j["stages"].size(), 3u);
  for (const char* key : {"name", "parallelism", "cores_used", "rate_per_core", "max_throughput"}) {
    EXPECT_TRUE(j["stages"][1].contains(key)) << key;
  }
  EXPECT_NEAR(j["stages"][1]["max_throughput"].get<double>(), 25, 0.5);
}

TEST(Report, MarkdownIsATableForCiSummaries) {
  std::string md = RenderReport(SampleDiagnosis(), ReportFormat::kMarkdown);
  EXPECT_EQ(md.rfind("### pipetune report: sample", 0), 0u);
  EXPECT_NE(md.find("| stage |"), std::string::npos);
  EXPECT_NE(md.find("**decode** (bottleneck)"), std::string::npos);
}

TEST(Report, HtmlIsSelfContainedWithItsCharts) {
  std::string html = RenderReport(SampleDiagnosis(), ReportFormat::kHtml);
  EXPECT_EQ(html.rfind("<!DOCTYPE html>", 0), 0u);
  EXPECT_NE(html.find("</html>"), std::string::npos);
  for (const char* chart : {"Throughput over time", "Consumer stall over time", "Predicted against measured",
                            "Per-stage utilisation"}) {
    EXPECT_NE(html.find(chart), std::string::npos) << chart;
  }
  size_t svgs = 0;
  for (size_t at = html.find("<svg"); at != std::string::npos; at = html.find("<svg", at + 1)) ++svgs;
  EXPECT_GE(svgs, 4u);
  // Nothing fetched: no scripts, no external references (the SVG namespace is not a fetch).
  EXPECT_EQ(html.find("<script"), std::string::npos);
  EXPECT_EQ(html.find("src="), std::string::npos);
  EXPECT_EQ(html.find("href="), std::string::npos);
  EXPECT_EQ(html.find("@import"), std::string::npos);
  EXPECT_EQ(html.find("url("), std::string::npos);
}

TEST(Report, NamesAreEscapedInHtml) {
  Diagnosis d = SampleDiagnosis();
  d.pipeline_name = "<b>x</b>";
  std::string html = RenderReport(d, ReportFormat::kHtml);
  EXPECT_EQ(html.find("<b>x</b>"), std::string::npos);
  EXPECT_NE(html.find("&lt;b&gt;x&lt;/b&gt;"), std::string::npos);
}

}  // namespace
}  // namespace pipetune::analyzer

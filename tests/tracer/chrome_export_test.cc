// Chrome export: valid JSON that Perfetto opens, with a track per worker,
// elements as slices, counters, consumer steps and GPU streams; bounded.
#include "pipetune/tracer/chrome_export.h"

#include <gtest/gtest.h>

#include <set>
#include <sstream>
#include <thread>

#include "pipetune/base/json.h"
#include "test_util.h"

namespace pipetune::tracer {
namespace {

class ChromeExport : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    path_ = new std::string(testing::TempTracePath("chrome"));
    testing::RecordSmallTrace(*path_, 150);
  }
  static void TearDownTestSuite() { delete path_; }
  static const std::string& path() { return *path_; }

 private:
  static std::string* path_;
};
std::string* ChromeExport::path_ = nullptr;

Json ExportOrFail(const std::string& path, const ChromeExportOptions& options, ChromeExportStats* stats) {
  std::ostringstream out;
  Status s = ExportChrome(path, out, options, stats);
  EXPECT_TRUE(s.ok()) << s.message();
  Json doc = Json::parse(out.str(), nullptr, /*allow_exceptions=*/false);
  EXPECT_FALSE(doc.is_discarded()) << out.str().substr(0, 2000);
  return doc;
}

TEST_F(ChromeExport, WritesTracksSlicesAndCounters) {
  ChromeExportStats stats;
  Json doc = ExportOrFail(path(), {}, &stats);
  ASSERT_TRUE(doc.contains("traceEvents"));
  const Json& events = doc["traceEvents"];
  ASSERT_TRUE(events.is_array());
  EXPECT_EQ(events.size(), stats.events_written);
  EXPECT_EQ(stats.events_dropped, 0u);

  std::set<std::string> thread_names, counters, slice_names, gpu_cats;
  for (const Json& e : events) {
    ASSERT_TRUE(e.contains("ph")) << e.dump();
    std::string ph = e["ph"];
    if (ph == "M" && e["name"] == "thread_name") thread_names.insert(e["args"]["name"].get<std::string>());
    if (ph == "C") counters.insert(e["name"].get<std::string>());
    if (ph == "X") {
      slice_names.insert(e["name"].get<std::string>());
      EXPECT_GE(e["dur"].get<double>(), 0.0);
      if (e["pid"] == 2) gpu_cats.insert(e["cat"].get<std::string>());
    }
  }
  EXPECT_TRUE(thread_names.count("map #0")) << Json(thread_names).dump();
  EXPECT_TRUE(thread_names.count("map #1"));
  EXPECT_TRUE(thread_names.count("source #0"));
  EXPECT_TRUE(thread_names.count("consumer"));
  EXPECT_TRUE(thread_names.count("GPU 0 stream 0"));
  EXPECT_TRUE(counters.count("map buffer"));
  EXPECT_TRUE(counters.count("map throughput"));
  EXPECT_TRUE(slice_names.count("map"));
  EXPECT_TRUE(slice_names.count("step"));
  EXPECT_TRUE(slice_names.count("wait for input"));
  EXPECT_TRUE(slice_names.count("gemm_kernel"));
  EXPECT_TRUE(gpu_cats.count("memcpy"));
  EXPECT_EQ(doc["otherData"]["events_dropped"], 0);
}

TEST_F(ChromeExport, MaxEventsBoundsTheOutputAndSaysSo) {
  ChromeExportOptions options;
  options.max_events = 10;
  ChromeExportStats stats;
  Json doc = ExportOrFail(path(), options, &stats);
  EXPECT_EQ(stats.events_written, 11u);  // 10, and the note saying what was left out
  EXPECT_GT(stats.events_dropped, 0u);
  EXPECT_EQ(doc["traceEvents"].size(), 11u);
  EXPECT_EQ(doc["otherData"]["events_dropped"].get<uint64_t>(), stats.events_dropped);
  EXPECT_NE(doc["traceEvents"].back()["name"].get<std::string>().find("not exported"), std::string::npos);
}

TEST_F(ChromeExport, OddNamesStayValidJson) {
  const std::string odd = testing::TempTracePath("odd_names");
  StageId stage = RegisterStage({"quote\" back\\slash \x01 bad\xff utf8 \xe2\x82\xac", "map", 1});
  SessionOptions options;
  options.path = odd;
  options.pipeline_name = "tab\there";
  ASSERT_TRUE(Start(options).ok());
  std::thread([&] {
    ScopedWorker w(stage);
    uint64_t t = NowNs();
    w->Work(t, t + 1000, 1);
  }).join();
  ASSERT_TRUE(Stop().ok());
  RetireStage(stage);
  Json doc = ExportOrFail(odd, {}, nullptr);
  bool found = false;
  for (const Json& e : doc["traceEvents"]) {
    if (e["ph"] == "X" && e["name"].get<std::string>().find("quote\" back\\slash") == 0) found = true;
  }
  EXPECT_TRUE(found);
}

TEST(ChromeExportErrors, NotATraceIsAnErrorAndWritesNothing) {
  const std::string path = testing::TempTracePath("chrome_bad");
  testing::WriteFileBytes(path, "garbage that is not a trace");
  std::ostringstream out;
  Status s = ExportChrome(path, out);
  EXPECT_EQ(s.code(), StatusCode::kInvalidInput);
  EXPECT_TRUE(out.str().empty());
}

}  // namespace
}  // namespace pipetune::tracer

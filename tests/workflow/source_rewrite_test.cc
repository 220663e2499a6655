// workflow::RewriteSource: `pipetune tune --source` runs the rewriter as a
// subprocess and fails with its message when it fails.
#include "pipetune/workflow/source_rewrite.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

namespace pipetune::workflow {
namespace {

namespace fs = std::filesystem;

class SourceRewriteTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("pipetune_source_rewrite_" + std::to_string(::getpid()));
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  // A stand-in rewriter: prints its arguments and the plan's pipeline, exits `rc`.
  std::string FakeRewriter(int rc, const std::string& message) {
    std::string path = (dir_ / "fake-rewrite").string();
    std::ofstream(path) << "#!/bin/sh\necho \"args: $*\"\ngrep -o '\"pipeline\": \"[a-z]*\"' \"$4\"\necho '"
                        << message << "' >&2\nexit " << rc << "\n";
    ::chmod(path.c_str(), 0755);
    return path;
  }

  fs::path dir_;
};

TEST_F(SourceRewriteTest, RunsTheRewriterWithThePlan) {
  SourceRewriteRequest request;
  request.source = "prog.cc";
  request.plan = {{"pipeline", "demo"}, {"knobs", Json::array()}};
  request.rewriter = FakeRewriter(0, "rewrote prog.cc");
  request.build_dir = "builddir";
  StatusOr<SourceRewriteResult> result = RewriteSource(request);
  ASSERT_TRUE(result.ok()) << result.status().message();
  EXPECT_NE(result->output.find("args: apply prog.cc --plan"), std::string::npos) << result->output;
  EXPECT_NE(result->output.find("-i -p builddir"), std::string::npos) << result->output;
  EXPECT_NE(result->output.find("\"pipeline\": \"demo\""), std::string::npos) << result->output;
  EXPECT_NE(result->output.find("rewrote prog.cc"), std::string::npos) << result->output;
}

TEST_F(SourceRewriteTest, AFailedRewriteIsAnErrorWithTheRewritersMessage) {
  SourceRewriteRequest request;
  request.source = "prog.cc";
  request.plan = {{"pipeline", "demo"}, {"knobs", Json::array()}};
  request.rewriter = FakeRewriter(2, "stage \"decode\": knob parallelism cannot be rewritten");
  StatusOr<SourceRewriteResult> result = RewriteSource(request);
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.status().code(), StatusCode::kInvalidInput);
  EXPECT_NE(result.status().message().find("stage \"decode\": knob parallelism cannot be rewritten"),
            std::string::npos)
      << result.status().message();
}

TEST_F(SourceRewriteTest, AMissingRewriterSaysHowToGetOne) {
  SourceRewriteRequest request;
  request.source = "prog.cc";
  request.plan = {{"pipeline", "demo"}, {"knobs", Json::array()}};
  request.rewriter = (dir_ / "no-such-rewriter").string();
  StatusOr<SourceRewriteResult> result = RewriteSource(request);
  ASSERT_FALSE(result.ok());
  EXPECT_NE(result.status().message().find("PIPETUNE_WITH_CLANG"), std::string::npos)
      << result.status().message();
}

}  // namespace
}  // namespace pipetune::workflow

// The closed loop (pipetune/verify): it runs real pipelines, so these tests
// take a few seconds each.
#include <gtest/gtest.h>
#include <time.h>

#include <filesystem>
#include <mutex>

#include "pipetune/runtime/function_registry.h"
#include "pipetune/verify/verify.h"
#include "test_profiles.h"

namespace pipetune::verify {
namespace {

uint64_t ThreadCpuNs() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000u + static_cast<uint64_t>(ts.tv_nsec);
}

// `us` microseconds of CPU per element, all of it inside one process-wide
// lock: however many workers the stage has, one element runs at a time.
class LockedWork : public runtime::MapFunction {
 public:
  explicit LockedWork(double us) : ns_(static_cast<uint64_t>(us * 1e3)) {}
  Status Apply(runtime::Element&, const runtime::FnContext&) const override {
    static std::mutex lock;
    std::lock_guard<std::mutex> held(lock);
    uint64_t until = ThreadCpuNs() + ns_;
    while (ThreadCpuNs() < until) {
    }
    return Status::Ok();
  }

 private:
  uint64_t ns_;
};

runtime::FunctionRegistry WithLockedWork() {
  runtime::FunctionRegistry registry = runtime::FunctionRegistry::Builtins();
  registry.RegisterMap("locked_work", [](const models::StageConfig& stage)
                                          -> StatusOr<std::unique_ptr<runtime::MapFunction>> {
    PIPETUNE_ASSIGN_OR_RETURN(auto us, models::ArgNumber(stage, "us", 0));
    return std::unique_ptr<runtime::MapFunction>(new LockedWork(us.value_or(100)));
  });
  return registry;
}

TEST(VerifyTune, CatchesAStageThatDoesNotScaleAndRefitsIt) {
  models::PipelineConfig config = tuner::testing::ParseOrDie(R"({"name": "locked", "stages": [
    {"name": "src", "op": "range"},
    {"name": "locked", "op": "map", "fn": "locked_work", "args": {"us": 500}}]})");
  runtime::FunctionRegistry registry = WithLockedWork();
  VerifyOptions options;
  options.seconds = 1.5;
  options.rounds = 2;
  options.budgets.cores = 2;
  options.registry = &registry;
  StatusOr<VerifyResult> result = VerifyTune(config, options);
  ASSERT_TRUE(result.ok()) << result.status().message();
  ASSERT_EQ(result->rounds.size(), 3u) << FormatRoundTable(*result);
  const Round& linear = result->rounds[1];   // planned assuming linear scaling
  const Round& refit = result->rounds[2];    // planned with the fitted curve
  EXPECT_GE(linear.config.stages[1].parallelism, 2) << FormatRoundTable(*result);
  EXPECT_LT(linear.measured_throughput, 0.8 * linear.predicted_throughput) << FormatRoundTable(*result);
  // The refit sees that more workers do not help: it takes them back, and no
  // longer predicts more than the lock lets through (one element per 0.5 ms).
  // (Measured throughput is not compared here: on a loaded test machine it
  // varies too much between runs to be a fair check of the model.)
  EXPECT_LE(refit.config.stages[1].parallelism, 2) << FormatRoundTable(*result);
  EXPECT_LE(refit.predicted_throughput, 2000 * 1.1) << FormatRoundTable(*result);
  EXPECT_LT(refit.predicted_throughput, 0.7 * linear.predicted_throughput) << FormatRoundTable(*result);
  EXPECT_FALSE(FormatRoundTable(*result).empty());
  for (const Round& round : result->rounds) EXPECT_TRUE(round.trace_path.empty());  // temporary traces removed
}

TEST(VerifyTune, KeepsTheBestMeasuredAndStopsWhenNothingChanges) {
  models::PipelineConfig config = tuner::testing::ParseOrDie(R"({"name": "cpu", "stages": [
    {"name": "src", "op": "range"},
    {"name": "work", "op": "map", "fn": "cpu_work", "args": {"us": 300}},
    {"name": "batch", "op": "batch", "args": {"size": 4}}]})");
  std::string dir = (std::filesystem::temp_directory_path() / "pipetune_verify_test").string();
  VerifyOptions options;
  options.seconds = 1;
  options.rounds = 3;
  options.budgets.cores = 2;
  options.trace_dir = dir;
  int phases = 0;
  options.on_phase = [&](const Phase&) { ++phases; };
  StatusOr<VerifyResult> result = VerifyTune(config, options);
  ASSERT_TRUE(result.ok()) << result.status().message();
  EXPECT_GT(phases, 0);
  const Round& best = result->rounds[result->best];
  for (const Round& round : result->rounds) EXPECT_LE(round.measured_throughput, best.measured_throughput);
  EXPECT_GT(best.measured_throughput, result->rounds[0].measured_throughput);
  EXPECT_TRUE(std::filesystem::exists(result->rounds[0].trace_path));  // kept where asked
  std::filesystem::remove_all(dir);
}

TEST(VerifyTune, BadOptionsAreInvalidInput) {
  models::PipelineConfig config = tuner::testing::ParseOrDie(R"({"name": "x", "stages": [
    {"name": "src", "op": "range"}]})");
  VerifyOptions options;
  options.seconds = 0;
  StatusOr<VerifyResult> result = VerifyTune(config, options);
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.status().code(), StatusCode::kInvalidInput);
}

}  // namespace
}  // namespace pipetune::verify

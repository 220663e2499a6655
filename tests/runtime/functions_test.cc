// The registry and the synthetic element functions, as a stage uses them.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <mutex>
#include <set>

#include "pipetune/base/clock.h"
#include "pipetune/runtime/function_registry.h"
#include "test_util.h"

namespace pipetune::runtime::test {
namespace {

using ::testing::HasSubstr;

models::StageConfig MapStage(const std::string& fn, Json args) {
  models::StageConfig stage;
  stage.name = "work";
  stage.index = 1;
  stage.op = models::Op::kMap;
  stage.fn = fn;
  stage.args = std::move(args);
  return stage;
}

TEST(RegistryTest, BuiltinsHaveTheSyntheticAndImageFunctions) {
  const FunctionRegistry& builtins = FunctionRegistry::Builtins();
  EXPECT_THAT(builtins.MapNames(), ::testing::IsSupersetOf({"cpu_work", "io_wait", "jpeg_decode", "resize",
                                                            "random_crop_flip", "normalize"}));
  EXPECT_THAT(builtins.FilterNames(), ::testing::Contains("keep_every"));
}

TEST(RegistryTest, CustomFunctionsRegisterByName) {
  FunctionRegistry registry;
  registry.RegisterMap("double_id", [](const models::StageConfig&) -> StatusOr<std::unique_ptr<MapFunction>> {
    struct DoubleId : MapFunction {
      Status Apply(Element& e, const FnContext&) const override {
        e.id *= 2;
        return Status::Ok();
      }
    };
    return std::unique_ptr<MapFunction>(new DoubleId());
  });
  BuildOptions options;
  options.registry = &registry;
  Outputs out = Drain(RangeThen(5, R"({"name": "d", "op": "map", "fn": "double_id"})"), options);
  ASSERT_TRUE(out.status.ok());
  ASSERT_EQ(out.elements.size(), 5u);
  EXPECT_EQ(out.elements[4].id, 8u);
}

// Fused maps: one stage running the steps in turn, its errors naming the
// step, and the first step seeing the stage's own seed.
TEST(ChainTest, RunsItsStepsInOrderAndNamesAFailingStep) {
  auto chain = FunctionRegistry::Builtins().MakeMap(MapStage(
      "chain", {{"steps", Json::array({{{"fn", "cpu_work"}, {"args", {{"us", 1}, {"bytes", "1KiB"}}}},
                                       {{"fn", "cpu_work"}, {"args", {{"us", 1}, {"bytes", "4KiB"}}}}})}}));
  ASSERT_TRUE(chain.ok()) << chain.status().message();
  Element element;
  element.id = 7;
  element.label = 3;
  ASSERT_TRUE((*chain)->Apply(element, FnContext{42}).ok());
  ASSERT_NE(element.data, nullptr);
  EXPECT_EQ(element.data->size(), 4096u) << "the second step's output";
  EXPECT_EQ(element.id, 7u);
  EXPECT_EQ(element.label, 3);

  auto unknown = FunctionRegistry::Builtins().MakeMap(MapStage(
      "chain",
      {{"steps", Json::array({{{"fn", "cpu_work"}, {"args", {{"us", 1}}}}, {{"fn", "cpu_wrok"}}})}}));
  ASSERT_FALSE(unknown.ok());
  EXPECT_THAT(unknown.status().message(), HasSubstr("work, step 2 (cpu_wrok)"));
  EXPECT_THAT(unknown.status().message(), HasSubstr("unknown map function"));
  auto one = FunctionRegistry::Builtins().MakeMap(
      MapStage("chain", {{"steps", Json::array({{{"fn", "cpu_work"}}})}}));
  ASSERT_FALSE(one.ok());
  EXPECT_THAT(one.status().message(), HasSubstr("args.steps"));
}

TEST(ChainTest, TheFirstStepDrawsWhatTheStageDrewAlone) {
  Json crop = {{"size", 8}, {"flip_probability", 0.5}};
  models::StageConfig crop_stage = MapStage("random_crop_flip", crop);
  crop_stage.random = true;
  models::StageConfig chain_stage = MapStage(
      "chain",
      {{"steps", Json::array({{{"fn", "random_crop_flip"}, {"args", crop}}, {{"fn", "normalize"}}})}});
  chain_stage.random = true;
  auto alone = FunctionRegistry::Builtins().MakeMap(crop_stage);
  auto chain = FunctionRegistry::Builtins().MakeMap(chain_stage);
  auto normalize = FunctionRegistry::Builtins().MakeMap(MapStage("normalize", Json::object()));
  ASSERT_TRUE(alone.ok()) << alone.status().message();
  ASSERT_TRUE(chain.ok()) << chain.status().message();
  ASSERT_TRUE(normalize.ok()) << normalize.status().message();
  for (uint64_t seed : {1u, 2u, 3u}) {
    Element image;
    image.dtype = DType::kU8;
    image.shape = {32, 48, 3};
    auto pixels = std::make_shared<Bytes>(32 * 48 * 3);
    for (size_t i = 0; i < pixels->size(); ++i) (*pixels)[i] = static_cast<uint8_t>(i * 7);
    image.data = pixels;
    Element separate = image, fused = image;
    ASSERT_TRUE((*alone)->Apply(separate, FnContext{seed}).ok());
    ASSERT_TRUE((*normalize)->Apply(separate, FnContext{seed}).ok());
    ASSERT_TRUE((*chain)->Apply(fused, FnContext{seed}).ok());
    EXPECT_EQ(*separate.data, *fused.data) << "seed " << seed;
  }
}

TEST(CpuWorkTest, BurnsTheRequestedCpuTime) {
  auto fn = FunctionRegistry::Builtins().MakeMap(MapStage("cpu_work", {{"us", 20000}}));
  ASSERT_TRUE(fn.ok()) << fn.status().message();
  Element element;
  ASSERT_TRUE((*fn)->Apply(element, FnContext{}).ok());  // the first call may calibrate
  double begin = ThreadCpuSeconds();
  for (uint64_t id = 0; id < 5; ++id) {
    element.id = id;
    ASSERT_TRUE((*fn)->Apply(element, FnContext{}).ok());
  }
  double cpu = ThreadCpuSeconds() - begin;
  // Burning, not sleeping (a sleep would cost ~0 CPU). The bounds are wide
  // because the spin loop is calibrated once, and a sanitizer build on a
  // loaded machine shifts what one iteration costs.
  EXPECT_GT(cpu, 0.100 * 0.6);
  EXPECT_LT(cpu, 0.100 * 1.5);
}

TEST(CpuWorkTest, JitterVariesCostPerElementButKeepsTheMean) {
  auto fn = FunctionRegistry::Builtins().MakeMap(MapStage("cpu_work", {{"us", 2000}, {"jitter", 0.8}}));
  ASSERT_TRUE(fn.ok());
  std::vector<double> costs;
  Element element;
  for (uint64_t id = 0; id < 40; ++id) {
    element.id = id;
    double begin = ThreadCpuSeconds();
    ASSERT_TRUE((*fn)->Apply(element, FnContext{}).ok());
    costs.push_back(ThreadCpuSeconds() - begin);
  }
  double mean = 0;
  for (double c : costs) mean += c / costs.size();
  EXPECT_GT(mean, 0.002 * 0.75);
  EXPECT_LT(mean, 0.002 * 1.3);
  EXPECT_GT(*std::max_element(costs.begin(), costs.end()), 2 * *std::min_element(costs.begin(), costs.end()));
}

TEST(CpuWorkTest, BytesSetsThePayload) {
  auto fn = FunctionRegistry::Builtins().MakeMap(MapStage("cpu_work", {{"us", 1}, {"bytes", "4KiB"}}));
  ASSERT_TRUE(fn.ok());
  Element element;
  ASSERT_TRUE((*fn)->Apply(element, FnContext{}).ok());
  ASSERT_TRUE(element.data);
  EXPECT_EQ(element.data->size(), 4096u);
  EXPECT_EQ(element.dtype, DType::kBytes);
  EXPECT_EQ(element.ByteSize(), 4096u);
}

TEST(IoWaitTest, WaitsWithoutUsingCpu) {
  auto fn = FunctionRegistry::Builtins().MakeMap(MapStage("io_wait", {{"ms", 30}}));
  ASSERT_TRUE(fn.ok());
  Element element;
  double cpu_begin = ThreadCpuSeconds();
  auto begin = std::chrono::steady_clock::now();
  ASSERT_TRUE((*fn)->Apply(element, FnContext{}).ok());
  double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count();
  EXPECT_GE(wall, 0.030);
  EXPECT_LT(wall, 0.2);
  EXPECT_LT(ThreadCpuSeconds() - cpu_begin, 0.005);
}

TEST(KeepEveryTest, KeepsOneInN) {
  models::StageConfig stage = MapStage("keep_every", {{"n", 3}});
  stage.op = models::Op::kFilter;
  auto fn = FunctionRegistry::Builtins().MakeFilter(stage);
  ASSERT_TRUE(fn.ok());
  std::vector<uint64_t> kept;
  for (uint64_t id = 0; id < 10; ++id) {
    Element element;
    element.id = id;
    if (*(*fn)->Keep(element, FnContext{})) kept.push_back(id);
  }
  EXPECT_EQ(kept, (std::vector<uint64_t>{0, 3, 6, 9}));
}

TEST(KeepEveryTest, NeedsN) {
  models::StageConfig stage = MapStage("keep_every", Json::object());
  stage.op = models::Op::kFilter;
  auto fn = FunctionRegistry::Builtins().MakeFilter(stage);
  ASSERT_FALSE(fn.ok());
  EXPECT_THAT(fn.status().message(), HasSubstr("args.n"));
}

TEST(SeedTest, RandomFunctionsSeeDifferentSeedsPerElementAndEpoch) {
  std::vector<uint64_t> seeds;
  FunctionRegistry registry;
  static std::mutex mu;
  static std::vector<std::pair<uint64_t, uint64_t>>* seen = nullptr;
  std::vector<std::pair<uint64_t, uint64_t>> recorded;
  seen = &recorded;
  registry.RegisterMap("record", [](const models::StageConfig&) -> StatusOr<std::unique_ptr<MapFunction>> {
    struct Record : MapFunction {
      Status Apply(Element& e, const FnContext& c) const override {
        std::lock_guard<std::mutex> lock(mu);
        seen->emplace_back(e.id + 1000 * e.epoch, c.seed);
        return Status::Ok();
      }
    };
    return std::unique_ptr<MapFunction>(new Record());
  });
  BuildOptions options;
  options.registry = &registry;
  auto config = RangeThen(10, R"({"name": "r", "op": "map", "fn": "record", "parallelism": 3},
                                 {"name": "repeat", "op": "repeat", "args": {"count": 2}})");
  ASSERT_TRUE(Drain(config, options).status.ok());
  auto first = recorded;
  recorded.clear();
  ASSERT_TRUE(Drain(config, options).status.ok());
  std::sort(first.begin(), first.end());
  std::sort(recorded.begin(), recorded.end());
  EXPECT_EQ(first, recorded) << "seeds differ between runs";
  std::set<uint64_t> distinct;
  for (const auto& [key, seed] : first) distinct.insert(seed);
  EXPECT_EQ(distinct.size(), 20u);
  seen = nullptr;
}

}  // namespace
}  // namespace pipetune::runtime::test

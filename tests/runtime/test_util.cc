#include "test_util.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <stdexcept>

namespace pipetune::runtime::test {

models::PipelineConfig Config(const std::string& json) {
  auto config = models::ParseConfig(json, "test");
  EXPECT_TRUE(config.ok()) << config.status().message() << "\n" << json;
  return config.ok() ? std::move(config).value() : models::PipelineConfig{};
}

models::PipelineConfig RangeThen(uint64_t count, const std::string& stages) {
  std::string rest = stages.empty() ? "" : ", " + stages;
  return Config(fmt::format(R"({{"name": "t", "stages": [
      {{"name": "src", "op": "range", "args": {{"count": {}}}}}{}]}})",
                            count, rest));
}

Outputs Drain(const models::PipelineConfig& config, const BuildOptions& options) {
  Outputs out;
  auto pipeline = Pipeline::Create(config, options);
  if (!pipeline.ok()) {
    out.status = pipeline.status();
    return out;
  }
  Element element;
  while (true) {
    StatusOr<bool> next = (*pipeline)->Next(&element);
    if (!next.ok()) {
      out.status = next.status();
      break;
    }
    if (!*next) break;
    out.elements.push_back(std::move(element));
  }
  out.stages = (*pipeline)->StageSummaries();
  out.peak_buffer_bytes = (*pipeline)->PeakBufferBytes();
  out.cache_bytes = (*pipeline)->CacheBytes();
  return out;
}

namespace {
void AddLeaves(const Element& element, std::vector<std::pair<uint32_t, uint64_t>>* out) {
  if (element.items.empty()) {
    out->emplace_back(element.epoch, element.id);
    return;
  }
  for (const Element& item : element.items) AddLeaves(item, out);
}
}  // namespace

std::vector<std::pair<uint32_t, uint64_t>> Leaves(const std::vector<Element>& outputs) {
  std::vector<std::pair<uint32_t, uint64_t>> out;
  for (const Element& element : outputs) AddLeaves(element, &out);
  return out;
}

std::map<std::pair<uint32_t, uint64_t>, int> Histogram(const std::vector<Element>& outputs) {
  std::map<std::pair<uint32_t, uint64_t>, int> counts;
  for (const auto& leaf : Leaves(outputs)) ++counts[leaf];
  return counts;
}

std::atomic<uint64_t>& CallCount() {
  static std::atomic<uint64_t> count{0};
  return count;
}

std::atomic<int64_t>& LastFailureNs() {
  static std::atomic<int64_t> ns{0};
  return ns;
}

namespace {

Status InjectedFailure() {
  LastFailureNs() = std::chrono::steady_clock::now().time_since_epoch().count();
  return Failed("injected failure");
}

class Count : public MapFunction {
 public:
  Status Apply(Element&, const FnContext&) const override {
    CallCount().fetch_add(1);
    return Status::Ok();
  }
};

struct FailRule {
  uint64_t every = 1, at = 0;
  bool Fails(uint64_t id) const { return id % every == at; }
};

StatusOr<FailRule> ReadRule(const models::StageConfig& stage) {
  FailRule rule;
  PIPETUNE_ASSIGN_OR_RETURN(auto every, models::ArgInt(stage, "every", 1));
  PIPETUNE_ASSIGN_OR_RETURN(auto at, models::ArgInt(stage, "at", 0));
  rule.every = static_cast<uint64_t>(every.value_or(1));
  rule.at = static_cast<uint64_t>(at.value_or(0));
  return rule;
}

class Fail : public MapFunction {
 public:
  explicit Fail(FailRule rule) : rule_(rule) {}
  Status Apply(Element& element, const FnContext&) const override {
    if (rule_.Fails(element.id)) return InjectedFailure();
    return Status::Ok();
  }

 private:
  FailRule rule_;
};

class Throw : public MapFunction {
 public:
  explicit Throw(FailRule rule) : rule_(rule) {}
  Status Apply(Element& element, const FnContext&) const override {
    if (rule_.Fails(element.id)) throw std::runtime_error("thrown on purpose");
    return Status::Ok();
  }

 private:
  FailRule rule_;
};

class FailFilter : public FilterFunction {
 public:
  explicit FailFilter(FailRule rule) : rule_(rule) {}
  StatusOr<bool> Keep(const Element& element, const FnContext&) const override {
    if (rule_.Fails(element.id)) return InjectedFailure();
    return true;
  }

 private:
  FailRule rule_;
};

}  // namespace

const FunctionRegistry& TestRegistry() {
  static const FunctionRegistry registry = [] {
    FunctionRegistry r;
    RegisterSyntheticFunctions(r);
    r.RegisterMap("count", [](const models::StageConfig&) -> StatusOr<std::unique_ptr<MapFunction>> {
      return std::unique_ptr<MapFunction>(new Count());
    });
    r.RegisterMap("fail", [](const models::StageConfig& stage) -> StatusOr<std::unique_ptr<MapFunction>> {
      PIPETUNE_ASSIGN_OR_RETURN(FailRule rule, ReadRule(stage));
      return std::unique_ptr<MapFunction>(new Fail(rule));
    });
    r.RegisterMap("throw", [](const models::StageConfig& stage) -> StatusOr<std::unique_ptr<MapFunction>> {
      PIPETUNE_ASSIGN_OR_RETURN(FailRule rule, ReadRule(stage));
      return std::unique_ptr<MapFunction>(new Throw(rule));
    });
    r.RegisterFilter("fail_filter",
                     [](const models::StageConfig& stage) -> StatusOr<std::unique_ptr<FilterFunction>> {
                       PIPETUNE_ASSIGN_OR_RETURN(FailRule rule, ReadRule(stage));
                       return std::unique_ptr<FilterFunction>(new FailFilter(rule));
                     });
    return r;
  }();
  return registry;
}

std::string TempDir(const std::string& name) {
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  std::string test = info ? fmt::format("{}.{}", info->test_suite_name(), info->name()) : "test";
  for (char& c : test) {
    if (c == '/') c = '_';
  }
  std::filesystem::path dir = std::filesystem::path(PIPETUNE_BINARY_DIR) / "runtime_test_tmp" / test / name;
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir.string();
}

}  // namespace pipetune::runtime::test

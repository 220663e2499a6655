// PipelineBuilder: writes the config document a JSON file would hold and
// parses it with models::ParseConfig, so a built pipeline is validated and
// reported exactly as a JSON one (docs/builder.md).
#include "pipetune/runtime/builder.h"

#include <fmt/format.h>

#include <map>
#include <set>

namespace pipetune::runtime {
namespace {

class CallableMap final : public MapFunction {
 public:
  explicit CallableMap(MapCallable fn) : fn_(std::move(fn)) {}
  Status Apply(Element& element, const FnContext& context) const override { return fn_(element, context); }

 private:
  MapCallable fn_;
};

class CallableFilter final : public FilterFunction {
 public:
  explicit CallableFilter(FilterCallable fn) : fn_(std::move(fn)) {}
  StatusOr<bool> Keep(const Element& element, const FnContext& context) const override {
    return fn_(element, context);
  }

 private:
  FilterCallable fn_;
};

const char* OnErrorName(models::OnError on_error) {
  return on_error == models::OnError::kSkip ? "skip" : "stop";
}

// A config is JSON, so its strings are UTF-8: a C++ string that is not (a
// Latin-1 source file's) is refused, naming where and the byte, rather than
// thrown out of the program by the JSON writer.
Status CheckUtf8(const Json& value, const std::string& where) {
  try {
    (void)value.dump();
  } catch (const Json::type_error& error) {
    return InvalidInput(fmt::format("{}: not UTF-8 ({})", where, error.what()));
  }
  return Status::Ok();
}

}  // namespace

StageBuilder& StageBuilder::Parallelism(int workers) {
  parallelism_ = workers;
  return *this;
}

StageBuilder& StageBuilder::Buffer(int64_t elements) {
  buffer_ = elements;
  return *this;
}

StageBuilder& StageBuilder::Location(const std::string& where) {
  location_ = where;
  return *this;
}

StageBuilder& StageBuilder::Random(bool random) {
  random_ = random;
  return *this;
}

StageBuilder& StageBuilder::OnError(models::OnError on_error) {
  on_error_ = on_error;
  return *this;
}

StageBuilder& StageBuilder::Arg(const std::string& key, Json value) {
  args_[key] = std::move(value);
  return *this;
}

PipelineBuilder::PipelineBuilder(std::string name)
    : name_(std::move(name)), registry_(std::make_unique<FunctionRegistry>(FunctionRegistry::Builtins())) {}

PipelineBuilder& PipelineBuilder::Cores(double cores) {
  cores_ = cores;
  return *this;
}

PipelineBuilder& PipelineBuilder::Memory(const std::string& size) {
  memory_ = size;
  return *this;
}

PipelineBuilder& PipelineBuilder::StorageBytesPerSecond(double bytes_per_second) {
  storage_ = bytes_per_second;
  return *this;
}

PipelineBuilder& PipelineBuilder::StepTimeMs(double ms) {
  step_time_ms_ = ms;
  return *this;
}

StageBuilder& PipelineBuilder::Add(const std::string& name, const std::string& op) {
  stages_.push_back(StageBuilder(name, op));
  return stages_.back();
}

StageBuilder& PipelineBuilder::Stage(const std::string& name, const std::string& op) { return Add(name, op); }

StageBuilder& PipelineBuilder::Range(const std::string& name, int64_t count) {
  return Add(name, "range").Arg("count", count);
}

StageBuilder& PipelineBuilder::ListFiles(const std::string& name, const std::string& pattern) {
  return Add(name, "list_files").Arg("pattern", pattern);
}

StageBuilder& PipelineBuilder::ReadFile(const std::string& name) { return Add(name, "read_file"); }

StageBuilder& PipelineBuilder::Map(const std::string& name, const std::string& fn) {
  StageBuilder& stage = Add(name, "map");
  stage.fn_ = fn;
  return stage;
}

StageBuilder& PipelineBuilder::Filter(const std::string& name, const std::string& fn) {
  StageBuilder& stage = Add(name, "filter");
  stage.fn_ = fn;
  return stage;
}

StageBuilder& PipelineBuilder::AddCustom(const std::string& name, const std::string& op,
                                         const std::string& fn) {
  StageBuilder& stage = Add(name, op);
  stage.fn_ = fn;
  std::set<std::string> builtin;
  const FunctionRegistry& builtins = FunctionRegistry::Builtins();
  for (const std::string& n : op == "map" ? builtins.MapNames() : builtins.FilterNames()) builtin.insert(n);
  if (builtin.count(fn) != 0) {
    stage.errors_.push_back(
        fmt::format("key \"fn\": \"{}\" is a built-in function; give the custom one another name", fn));
  }
  return stage;
}

StageBuilder& PipelineBuilder::Map(const std::string& name, MapCallable fn) {
  return Map(name, name, std::move(fn));
}

StageBuilder& PipelineBuilder::Map(const std::string& name, const std::string& fn, MapCallable callable) {
  StageBuilder& stage = AddCustom(name, "map", fn);
  if (!callable) {
    stage.errors_.push_back("key \"fn\": the custom function is empty");
    return stage;
  }
  stage.map_ = callable;
  registry_->RegisterMap(fn,
                         [callable](const models::StageConfig&) -> StatusOr<std::unique_ptr<MapFunction>> {
                           return std::unique_ptr<MapFunction>(std::make_unique<CallableMap>(callable));
                         });
  return stage;
}

StageBuilder& PipelineBuilder::Filter(const std::string& name, FilterCallable fn) {
  return Filter(name, name, std::move(fn));
}

StageBuilder& PipelineBuilder::Filter(const std::string& name, const std::string& fn,
                                      FilterCallable callable) {
  StageBuilder& stage = AddCustom(name, "filter", fn);
  if (!callable) {
    stage.errors_.push_back("key \"fn\": the custom function is empty");
    return stage;
  }
  stage.filter_ = callable;
  registry_->RegisterFilter(
      fn, [callable](const models::StageConfig&) -> StatusOr<std::unique_ptr<FilterFunction>> {
        return std::unique_ptr<FilterFunction>(std::make_unique<CallableFilter>(callable));
      });
  return stage;
}

StageBuilder& PipelineBuilder::Shuffle(const std::string& name, int64_t buffer) {
  return Add(name, "shuffle").Arg("buffer", buffer);
}

StageBuilder& PipelineBuilder::Batch(const std::string& name, int64_t size) {
  return Add(name, "batch").Arg("size", size);
}

StageBuilder& PipelineBuilder::Prefetch(const std::string& name) { return Add(name, "prefetch"); }

StageBuilder& PipelineBuilder::Cache(const std::string& name) { return Add(name, "cache"); }

StageBuilder& PipelineBuilder::Repeat(const std::string& name, int64_t count) {
  StageBuilder& stage = Add(name, "repeat");
  if (count >= 0) stage.Arg("count", count);
  return stage;
}

StageBuilder& PipelineBuilder::Take(const std::string& name, int64_t count) {
  return Add(name, "take").Arg("count", count);
}

StatusOr<Json> PipelineBuilder::Document() const {
  const std::string source = fmt::format("pipeline \"{}\" (builder)", name_);
  // Errors recorded while building, and the custom functions' names (one
  // name, one callable), come first: they name the stage as the parser would.
  std::map<std::string, const StageBuilder*> custom;
  for (size_t i = 0; i < stages_.size(); ++i) {
    const StageBuilder& s = stages_[i];
    if (!s.errors_.empty()) {
      return InvalidInput(
          fmt::format("{}: stage \"{}\" (#{}): {}", source, s.name_, i + 1, s.errors_.front()));
    }
    if (s.map_ || s.filter_) {
      auto [it, inserted] = custom.emplace(s.fn_, &s);
      if (!inserted) {
        return InvalidInput(fmt::format(
            "{}: stage \"{}\" (#{}): key \"fn\": custom function \"{}\" is already stage \"{}\"'s; give "
            "each callable its own name",
            source, s.name_, i + 1, s.fn_, it->second->name_));
      }
    }
  }
  Json doc = Json::object();
  doc["name"] = name_;
  PIPETUNE_RETURN_IF_ERROR(CheckUtf8(doc["name"], "the builder's pipeline name"));
  Json resources = Json::object();
  if (cores_) resources["cores"] = *cores_;
  if (memory_) resources["memory"] = *memory_;
  if (storage_) resources["storage_bandwidth"] = static_cast<uint64_t>(*storage_);
  if (!resources.empty()) doc["resources"] = std::move(resources);
  Json stages = Json::array();
  for (size_t i = 0; i < stages_.size(); ++i) {
    const StageBuilder& s = stages_[i];
    Json stage = Json::object();
    stage["name"] = s.name_;
    stage["op"] = s.op_;
    if (!s.fn_.empty()) stage["fn"] = s.fn_;
    if (!s.args_.empty()) stage["args"] = s.args_;
    if (s.parallelism_) stage["parallelism"] = *s.parallelism_;
    if (s.buffer_) stage["buffer"] = *s.buffer_;
    if (s.location_) stage["location"] = *s.location_;
    if (s.random_) stage["random"] = *s.random_;
    if (s.on_error_) stage["on_error"] = OnErrorName(*s.on_error_);
    PIPETUNE_RETURN_IF_ERROR(
        CheckUtf8(stage, fmt::format("{}: stage #{}'s name, function or a string argument", source, i + 1)));
    stages.push_back(std::move(stage));
  }
  doc["stages"] = std::move(stages);
  if (step_time_ms_) doc["consumer"] = {{"step_time_ms", *step_time_ms_}};
  return doc;
}

StatusOr<models::PipelineConfig> PipelineBuilder::Config() const {
  PIPETUNE_ASSIGN_OR_RETURN(Json doc, Document());
  return models::ParseConfig(doc.dump(), fmt::format("pipeline \"{}\" (builder)", name_));
}

StatusOr<std::string> PipelineBuilder::ToJson() const {
  PIPETUNE_ASSIGN_OR_RETURN(models::PipelineConfig config, Config());
  return models::Serialize(config);
}

StatusOr<std::unique_ptr<Pipeline>> PipelineBuilder::Build(BuildOptions options) const {
  PIPETUNE_ASSIGN_OR_RETURN(models::PipelineConfig config, Config());
  options.registry = registry_.get();
  return Pipeline::Create(config, options);
}

StatusOr<RunSummary> PipelineBuilder::Run(RunOptions options) const {
  PIPETUNE_ASSIGN_OR_RETURN(models::PipelineConfig config, Config());
  options.registry = registry_.get();
  return RunPipeline(config, options);
}

}  // namespace pipetune::runtime

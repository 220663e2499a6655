// Pipelines in C++ code: a builder that makes the same models::PipelineConfig
// a JSON config does, so the tracer, the analyzer and the tuner see no
// difference (docs/builder.md).
//
//   PipelineBuilder b("image_builder");
//   b.Cores(2).Memory("4GiB").StepTimeMs(20);
//   b.ListFiles("files", "data/*.jpg").Arg("shuffle_seed", 7);
//   b.ReadFile("read").Parallelism(1);
//   b.Map("decode", "jpeg_decode").Parallelism(kDecodeWorkers);
//   b.Map("tint", [](Element& e, const FnContext&) { ...; return Status::Ok(); }).Parallelism(1);
//   b.Batch("batch", 64);
//   b.Prefetch("prefetch").Buffer(1);
//   StatusOr<RunSummary> summary = b.Run({.max_seconds = 10});
//
// A stage is made by name and op; its knobs are methods of the StageBuilder
// it returns: Parallelism, Buffer, Location (a cache's place: "memory" or a
// directory), Random. The knob calls are what `pipetune-rewrite` finds and
// rewrites in the source (docs/rewrite.md): keep each knob's value a literal
// or a named constant for the rewriter to change it.
//
// The program's own element functions (lambdas, function objects) sit beside
// the built-in ones: Map/Filter with a callable registers it, under the
// stage's name unless a function name is given, in a registry the builder
// owns (a copy of FunctionRegistry::Builtins() plus these). The config then
// names it in "fn" like any built-in.
//
// Errors (a bad knob value, a duplicate stage, a custom function on an op that
// takes none) are reported by Config()/Build()/Run() and name the stage and
// key, as a JSON config's would; nothing is checked at the knob calls, so a
// chain of calls never needs error handling in between.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "pipetune/base/status.h"
#include "pipetune/models/config.h"
#include "pipetune/runtime/element.h"
#include "pipetune/runtime/function_registry.h"
#include "pipetune/runtime/pipeline.h"

namespace pipetune::runtime {

// A custom map: transforms the element in place.
using MapCallable = std::function<Status(Element&, const FnContext&)>;
// A custom filter: true keeps the element.
using FilterCallable = std::function<bool(const Element&, const FnContext&)>;

class PipelineBuilder;

// One stage. Returned by reference from PipelineBuilder's stage methods; it
// stays valid for the builder's lifetime.
class StageBuilder {
 public:
  // Knobs.
  StageBuilder& Parallelism(int workers);
  StageBuilder& Buffer(int64_t elements);
  StageBuilder& Location(const std::string& where);  // "memory" or a directory
  StageBuilder& Random(bool random = true);
  // Everything else.
  StageBuilder& OnError(models::OnError on_error);
  // An entry of the stage's "args" (any JSON value: number, string, bool).
  StageBuilder& Arg(const std::string& key, Json value);

  const std::string& name() const { return name_; }

 private:
  friend class PipelineBuilder;
  StageBuilder(std::string name, std::string op) : name_(std::move(name)), op_(std::move(op)) {}

  std::string name_;
  std::string op_;
  std::string fn_;
  Json args_ = Json::object();
  std::optional<int> parallelism_;
  std::optional<int64_t> buffer_;
  std::optional<std::string> location_;
  std::optional<bool> random_;
  std::optional<models::OnError> on_error_;
  MapCallable map_;
  FilterCallable filter_;
  std::vector<std::string> errors_;  // found while building, reported by Config()
};

class PipelineBuilder {
 public:
  explicit PipelineBuilder(std::string name);
  PipelineBuilder(const PipelineBuilder&) = delete;
  PipelineBuilder& operator=(const PipelineBuilder&) = delete;
  PipelineBuilder(PipelineBuilder&&) = default;
  PipelineBuilder& operator=(PipelineBuilder&&) = default;

  // Resources and the consumer.
  PipelineBuilder& Cores(double cores);
  PipelineBuilder& Memory(const std::string& size);  // "4GiB", or bytes as a string
  PipelineBuilder& StorageBytesPerSecond(double bytes_per_second);
  PipelineBuilder& StepTimeMs(double ms);  // the trainer's time per output; unset: drain

  // Any op by name ("map", "batch", ...): what the JSON's "op" says.
  StageBuilder& Stage(const std::string& name, const std::string& op);

  // Sources.
  StageBuilder& Range(const std::string& name, int64_t count);
  StageBuilder& ListFiles(const std::string& name, const std::string& pattern);
  StageBuilder& ReadFile(const std::string& name);

  // A built-in or already registered element function, by name.
  StageBuilder& Map(const std::string& name, const std::string& fn);
  StageBuilder& Filter(const std::string& name, const std::string& fn);
  // The program's own function; registered as `fn` (default: the stage name).
  StageBuilder& Map(const std::string& name, MapCallable fn);
  StageBuilder& Map(const std::string& name, const std::string& fn, MapCallable callable);
  StageBuilder& Filter(const std::string& name, FilterCallable fn);
  StageBuilder& Filter(const std::string& name, const std::string& fn, FilterCallable callable);

  // The rest.
  StageBuilder& Shuffle(const std::string& name, int64_t buffer);
  StageBuilder& Batch(const std::string& name, int64_t size);
  StageBuilder& Prefetch(const std::string& name);
  StageBuilder& Cache(const std::string& name);
  StageBuilder& Repeat(const std::string& name, int64_t count = -1);  // -1: forever
  StageBuilder& Take(const std::string& name, int64_t count);

  // The config document (as a JSON file would hold it) and the config parsed
  // from it: the same validation, the same errors, named after the stage.
  StatusOr<Json> Document() const;
  StatusOr<models::PipelineConfig> Config() const;
  // The config as JSON, 2-space indented (models::Serialize).
  StatusOr<std::string> ToJson() const;

  // Builtins plus every custom function of this builder.
  const FunctionRegistry& registry() const { return *registry_; }

  // Builds the pull pipeline (options.registry is set to registry()).
  StatusOr<std::unique_ptr<runtime::Pipeline>> Build(BuildOptions options = {}) const;
  // Runs the pipeline with its consumer (RunPipeline with registry()).
  StatusOr<RunSummary> Run(RunOptions options = {}) const;

 private:
  StageBuilder& Add(const std::string& name, const std::string& op);
  StageBuilder& AddCustom(const std::string& name, const std::string& op, const std::string& fn);

  std::string name_;
  std::optional<double> cores_;
  std::optional<std::string> memory_;
  std::optional<double> storage_;
  std::optional<double> step_time_ms_;
  std::deque<StageBuilder> stages_;  // a deque: references handed out stay valid
  std::unique_ptr<FunctionRegistry> registry_;
  std::vector<std::string> errors_;
};

}  // namespace pipetune::runtime

// Named element functions that `map` and `filter` stages call. A factory turns
// a stage's config into a ready function once, at pipeline build time, so a
// bad `args` value is an error naming the stage and key before anything runs,
// and the hot path does no parsing.
//
// Functions are called concurrently from every worker of their stage: Apply
// and Keep must be thread-safe (they are const; per-call state lives on the
// stack or in the FnContext).
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "pipetune/base/status.h"
#include "pipetune/models/config.h"
#include "pipetune/runtime/element.h"

namespace pipetune::runtime {

struct FnContext {
  // Deterministic per (stage, element id, epoch): a random function seeded
  // from it gives the same output for the same element whatever worker runs
  // it, and different output each epoch.
  uint64_t seed = 0;
};

class MapFunction {
 public:
  virtual ~MapFunction() = default;
  // Transforms `element` in place (replacing its payload). A non-ok Status is
  // the element's failure; the stage's on_error decides what happens next.
  virtual Status Apply(Element& element, const FnContext& context) const = 0;
};

class FilterFunction {
 public:
  virtual ~FilterFunction() = default;
  // True keeps the element.
  virtual StatusOr<bool> Keep(const Element& element, const FnContext& context) const = 0;
};

using MapFactory = std::function<StatusOr<std::unique_ptr<MapFunction>>(const models::StageConfig& stage)>;
using FilterFactory =
    std::function<StatusOr<std::unique_ptr<FilterFunction>>(const models::StageConfig& stage)>;

class FunctionRegistry {
 public:
  // The registry with every built-in function registered.
  static const FunctionRegistry& Builtins();

  void RegisterMap(const std::string& name, MapFactory factory);
  void RegisterFilter(const std::string& name, FilterFactory factory);

  // Errors name the stage and key: an unknown `fn` lists the known names.
  StatusOr<std::unique_ptr<MapFunction>> MakeMap(const models::StageConfig& stage) const;
  StatusOr<std::unique_ptr<FilterFunction>> MakeFilter(const models::StageConfig& stage) const;

  std::vector<std::string> MapNames() const;

  // `"fn": "chain"` with `"args": {"steps": [{"fn": NAME, "args": {...}}, ...]}`:
  // the steps' functions, from this registry, applied in order by one worker
  // (adjacent maps fused into one stage). MakeMap builds it for that name.
  // Every step is checked as written (errors name it); then adjacent steps
  // with a chain fold become one step doing both, with the same output and
  // the same seeds.
  StatusOr<std::unique_ptr<MapFunction>> MakeChain(const models::StageConfig& stage) const;

  // A chain fold: where a chain runs `first` then `second`, fold(first's
  // args, second's args) may give the args of one `first` step that does
  // the work of both in one pass, with the same output (nullopt: not for
  // these args). `second` must not draw from its seed: the folded step has
  // the first one's. Example: normalize folded into the output loop of a
  // resampling function.
  using ChainFold = std::function<std::optional<Json>(const Json& first_args, const Json& second_args)>;
  void RegisterChainFold(const std::string& first, const std::string& second, ChainFold fold);
  // Whether a chain of `first` then `second` (map stages, or steps as a
  // chain holds them) folds into one step: the same output in one pass less
  // (what the tuner may fuse without a predicted gain, docs/tuner.md).
  // False for a chain stage or an unregistered pair.
  bool Folds(const models::StageConfig& first, const models::StageConfig& second) const;
  std::vector<std::string> FilterNames() const;

 private:
  std::map<std::string, MapFactory> maps_;
  std::map<std::string, FilterFactory> filters_;
  std::map<std::pair<std::string, std::string>, ChainFold> chain_folds_;

  // The args of the one step doing `first` then `second`; nullopt when they
  // do not fold. What MakeChain and Folds both ask.
  std::optional<Json> FoldedArgs(const models::StageConfig& first, const models::StageConfig& second) const;
};

// Built-in families, each in its own source file.
void RegisterSyntheticFunctions(FunctionRegistry& registry);  // cpu_work, io_wait, keep_every
void RegisterImageFunctions(
    FunctionRegistry& registry);  // jpeg_decode, resize, center_crop, random_crop_flip, normalize

}  // namespace pipetune::runtime

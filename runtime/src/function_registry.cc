#include "pipetune/runtime/function_registry.h"

#include <fmt/format.h>

#include <exception>

#include "stage.h"

namespace pipetune::runtime {
namespace {

// Calls a factory; one that throws is a config error, not a crash.
template <typename Fn>
auto CallFactory(const Fn& factory, const models::StageConfig& stage) -> decltype(factory(stage)) {
  try {
    return factory(stage);
  } catch (const std::exception& e) {
    return InvalidInput(
        models::StageKeyError(stage, "fn", fmt::format("the function could not be built: {}", e.what())));
  } catch (...) {
    return InvalidInput(models::StageKeyError(stage, "fn", "the function could not be built"));
  }
}

std::string JoinNames(const std::vector<std::string>& names) {
  std::string out;
  for (const std::string& name : names) {
    if (!out.empty()) out += ", ";
    out += name;
  }
  return out.empty() ? "none" : out;
}

// `chain`: several map functions run one after another by one worker, as one
// stage: what the tuner writes when it fuses adjacent maps (docs/tuner.md),
// saving each element a hand-off between stages. Step 0 sees the stage's
// seed, so a chain whose first step is the only random one draws what that
// stage drew alone; later steps get seeds of their own from it, by their
// position as written (a folded step keeps the first one's).
class ChainFunction : public MapFunction {
 public:
  struct Step {
    std::unique_ptr<MapFunction> fn;
    size_t position = 0;  // in the chain as written
  };
  explicit ChainFunction(std::vector<Step> steps) : steps_(std::move(steps)) {}

  Status Apply(Element& element, const FnContext& context) const override {
    for (const Step& step : steps_) {
      FnContext one = context;
      if (step.position > 0) one.seed = Mix64(context.seed + step.position);
      PIPETUNE_RETURN_IF_ERROR(step.fn->Apply(element, one));
    }
    return Status::Ok();
  }

 private:
  const std::vector<Step> steps_;
};

}  // namespace

StatusOr<std::unique_ptr<MapFunction>> FunctionRegistry::MakeChain(const models::StageConfig& stage) const {
  const Json* steps = stage.args.is_object() && stage.args.contains("steps") ? &stage.args["steps"] : nullptr;
  if (steps == nullptr || !steps->is_array() || steps->size() < 2) {
    return InvalidInput(models::StageKeyError(
        stage, "args.steps",
        "expected an array of at least two steps, each {\"fn\": NAME, \"args\": {...}}"));
  }
  std::vector<models::StageConfig> configs;
  std::vector<ChainFunction::Step> made;
  for (size_t k = 0; k < steps->size(); ++k) {
    const Json& step = (*steps)[k];
    const std::string key = fmt::format("args.steps[{}]", k);
    if (!step.is_object() || !step.contains("fn") || !step["fn"].is_string()) {
      return InvalidInput(models::StageKeyError(stage, key, "expected {\"fn\": NAME, \"args\": {...}}"));
    }
    models::StageConfig one = stage;
    one.fn = step["fn"].get<std::string>();
    one.args = step.contains("args") ? step["args"] : Json::object();
    // Errors name the step: stage "augment, step 2 (normalize)".
    one.name = fmt::format("{}, step {} ({})", stage.name, k + 1, one.fn);
    if (one.fn == "chain")
      return InvalidInput(models::StageKeyError(stage, key + ".fn", "a chain cannot hold a chain"));
    PIPETUNE_ASSIGN_OR_RETURN(std::unique_ptr<MapFunction> fn, MakeMap(one));
    made.push_back({std::move(fn), k});
    configs.push_back(std::move(one));
  }
  // Every step is valid as written; now fold what folds, left to right (a
  // folded step may fold the next one in too).
  for (size_t k = 0; k + 1 < made.size();) {
    std::optional<Json> args = FoldedArgs(configs[k], configs[k + 1]);
    if (!args) {
      ++k;
      continue;
    }
    models::StageConfig folded = configs[k];
    folded.args = std::move(*args);
    PIPETUNE_ASSIGN_OR_RETURN(made[k].fn, MakeMap(folded));
    configs[k] = std::move(folded);
    made.erase(made.begin() + static_cast<std::ptrdiff_t>(k + 1));
    configs.erase(configs.begin() + static_cast<std::ptrdiff_t>(k + 1));
  }
  return std::unique_ptr<MapFunction>(new ChainFunction(std::move(made)));
}

std::optional<Json> FunctionRegistry::FoldedArgs(const models::StageConfig& first,
                                                 const models::StageConfig& second) const {
  auto fold = chain_folds_.find({first.fn, second.fn});
  if (fold == chain_folds_.end()) return std::nullopt;
  return fold->second(first.args, second.args);
}

bool FunctionRegistry::Folds(const models::StageConfig& first, const models::StageConfig& second) const {
  // A stage without args holds null where a chain's step holds {}.
  auto as_step = [](const models::StageConfig& stage) {
    models::StageConfig step = stage;
    if (step.args.is_null()) step.args = Json::object();
    return step;
  };
  return FoldedArgs(as_step(first), as_step(second)).has_value();
}

void FunctionRegistry::RegisterChainFold(const std::string& first, const std::string& second,
                                         ChainFold fold) {
  chain_folds_[{first, second}] = std::move(fold);
}

const FunctionRegistry& FunctionRegistry::Builtins() {
  static const FunctionRegistry registry = [] {
    FunctionRegistry r;
    RegisterSyntheticFunctions(r);
    RegisterImageFunctions(r);
    return r;
  }();
  return registry;
}

void FunctionRegistry::RegisterMap(const std::string& name, MapFactory factory) {
  maps_[name] = std::move(factory);
}

void FunctionRegistry::RegisterFilter(const std::string& name, FilterFactory factory) {
  filters_[name] = std::move(factory);
}

StatusOr<std::unique_ptr<MapFunction>> FunctionRegistry::MakeMap(const models::StageConfig& stage) const {
  if (stage.fn == "chain") return MakeChain(stage);
  auto it = maps_.find(stage.fn);
  if (it == maps_.end()) {
    std::string what = stage.fn.empty() ? "missing: a map stage names its element function"
                                        : fmt::format("unknown map function \"{}\"", stage.fn);
    if (filters_.count(stage.fn) > 0) what += " (it is a filter function: use op \"filter\")";
    return InvalidInput(models::StageKeyError(
        stage, "fn", fmt::format("{}; known map functions: {}", what, JoinNames(MapNames()))));
  }
  auto fn = CallFactory(it->second, stage);
  if (fn.ok() && *fn == nullptr) {
    return InvalidInput(models::StageKeyError(stage, "fn", "the function's factory returned nothing"));
  }
  return fn;
}

StatusOr<std::unique_ptr<FilterFunction>> FunctionRegistry::MakeFilter(
    const models::StageConfig& stage) const {
  auto it = filters_.find(stage.fn);
  if (it == filters_.end()) {
    std::string what = stage.fn.empty() ? "missing: a filter stage names its filter function"
                                        : fmt::format("unknown filter function \"{}\"", stage.fn);
    if (maps_.count(stage.fn) > 0) what += " (it is a map function: use op \"map\")";
    return InvalidInput(models::StageKeyError(
        stage, "fn", fmt::format("{}; known filter functions: {}", what, JoinNames(FilterNames()))));
  }
  auto fn = CallFactory(it->second, stage);
  if (fn.ok() && *fn == nullptr) {
    return InvalidInput(models::StageKeyError(stage, "fn", "the function's factory returned nothing"));
  }
  return fn;
}

std::vector<std::string> FunctionRegistry::MapNames() const {
  std::vector<std::string> names;
  for (const auto& [name, factory] : maps_) names.push_back(name);
  names.push_back("chain");  // MakeChain
  return names;
}

std::vector<std::string> FunctionRegistry::FilterNames() const {
  std::vector<std::string> names;
  for (const auto& [name, factory] : filters_) names.push_back(name);
  return names;
}

}  // namespace pipetune::runtime

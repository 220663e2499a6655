#include "pipetune/runtime/function_registry.h"

#include <fmt/format.h>

#include <exception>

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

}  // namespace

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
  return names;
}

std::vector<std::string> FunctionRegistry::FilterNames() const {
  std::vector<std::string> names;
  for (const auto& [name, factory] : filters_) names.push_back(name);
  return names;
}

}  // namespace pipetune::runtime

// Typed access to a stage's `args`, with errors that name the stage and key.
#include <fmt/format.h>

#include <cmath>
#include <limits>

#include "config_internal.h"
#include "pipetune/base/size.h"
#include "pipetune/models/config.h"

namespace pipetune::models {
namespace internal {

std::string DescribeJsonValue(const Json& value) {
  switch (value.type()) {
    case Json::value_t::null:
      return "null";
    case Json::value_t::object:
      return "an object";
    case Json::value_t::array:
      return "an array";
    case Json::value_t::string: {
      std::string s = value.get<std::string>();
      if (s.size() > 40) s = s.substr(0, 37) + "...";
      return fmt::format("\"{}\"", s);
    }
    default:
      return value.dump();
  }
}

bool IsInteger(const Json& value) {
  if (value.is_number_integer()) return true;
  return false;
}

}  // namespace internal

using internal::DescribeJsonValue;

std::string StageKeyError(const StageConfig& stage, std::string_view key, std::string_view what) {
  std::string where = stage.name.empty() ? fmt::format("stage #{}", stage.index + 1)
                                         : fmt::format("stage \"{}\" (#{})", stage.name, stage.index + 1);
  if (key.empty()) return fmt::format("{}: {}", where, what);
  return fmt::format("{}: key \"{}\": {}", where, key, what);
}

namespace {

const Json* FindArg(const StageConfig& stage, std::string_view key) {
  if (!stage.args.is_object()) return nullptr;
  auto it = stage.args.find(std::string(key));
  return it == stage.args.end() ? nullptr : &*it;
}

Status ArgError(const StageConfig& stage, std::string_view key, std::string_view expected, const Json& got) {
  return InvalidInput(StageKeyError(stage, fmt::format("args.{}", key),
                                    fmt::format("expected {}, got {}", expected, DescribeJsonValue(got))));
}

}  // namespace

StatusOr<std::optional<int64_t>> ArgInt(const StageConfig& stage, std::string_view key, int64_t min_value) {
  const Json* value = FindArg(stage, key);
  if (value == nullptr) return std::optional<int64_t>();
  std::string expected = fmt::format("an integer >= {}", min_value);
  if (!internal::IsInteger(*value)) return ArgError(stage, key, expected, *value);
  if (value->is_number_unsigned() &&
      value->get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
    return ArgError(stage, key, expected, *value);
  }
  int64_t v = value->get<int64_t>();
  if (v < min_value) return ArgError(stage, key, expected, *value);
  return std::optional<int64_t>(v);
}

StatusOr<std::optional<double>> ArgNumber(const StageConfig& stage, std::string_view key, double min_value) {
  const Json* value = FindArg(stage, key);
  if (value == nullptr) return std::optional<double>();
  std::string expected = fmt::format("a number >= {}", min_value);
  if (!value->is_number()) return ArgError(stage, key, expected, *value);
  double v = value->get<double>();
  if (!std::isfinite(v) || v < min_value) return ArgError(stage, key, expected, *value);
  return std::optional<double>(v);
}

StatusOr<std::optional<std::string>> ArgString(const StageConfig& stage, std::string_view key) {
  const Json* value = FindArg(stage, key);
  if (value == nullptr) return std::optional<std::string>();
  if (!value->is_string()) return ArgError(stage, key, "a string", *value);
  return std::optional<std::string>(value->get<std::string>());
}

StatusOr<std::optional<bool>> ArgBool(const StageConfig& stage, std::string_view key) {
  const Json* value = FindArg(stage, key);
  if (value == nullptr) return std::optional<bool>();
  if (!value->is_boolean()) return ArgError(stage, key, "true or false", *value);
  return std::optional<bool>(value->get<bool>());
}

StatusOr<std::optional<uint64_t>> ArgSize(const StageConfig& stage, std::string_view key) {
  const Json* value = FindArg(stage, key);
  if (value == nullptr) return std::optional<uint64_t>();
  if (value->is_number_unsigned()) return std::optional<uint64_t>(value->get<uint64_t>());
  if (value->is_string()) {
    StatusOr<uint64_t> bytes = ParseSize(value->get<std::string>());
    if (!bytes.ok()) {
      return InvalidInput(StageKeyError(stage, fmt::format("args.{}", key), bytes.status().message()));
    }
    return std::optional<uint64_t>(*bytes);
  }
  return ArgError(stage, key, "a size in bytes or a string like \"4MiB\"", *value);
}

StatusOr<bool> BatchDropsRemainder(const StageConfig& stage) {
  PIPETUNE_ASSIGN_OR_RETURN(auto drop_last, ArgBool(stage, "drop_last"));
  PIPETUNE_ASSIGN_OR_RETURN(auto drop_remainder, ArgBool(stage, "drop_remainder"));
  if (drop_last && drop_remainder && *drop_last != *drop_remainder) {
    return InvalidInput(StageKeyError(
        stage, "args.drop_last", "contradicts args.drop_remainder (the same setting): give one of them"));
  }
  return drop_last.value_or(drop_remainder.value_or(false));
}

StatusOr<std::vector<std::string>> ArgExtensions(const StageConfig& stage) {
  const Json* value = FindArg(stage, "extensions");
  // torchvision.datasets.folder.IMG_EXTENSIONS.
  if (value == nullptr)
    return std::vector<std::string>{".jpg", ".jpeg", ".png",  ".ppm", ".bmp",
                                    ".pgm", ".tif",  ".tiff", ".webp"};
  std::vector<std::string> extensions;
  bool ok = value->is_array() && !value->empty();
  for (size_t i = 0; ok && i < value->size(); ++i) {
    ok = (*value)[i].is_string() && !(*value)[i].get<std::string>().empty();
    if (ok) extensions.push_back((*value)[i].get<std::string>());
  }
  if (!ok)
    return ArgError(stage, "extensions", "a non-empty array of suffixes such as [\".jpg\", \".png\"]",
                    *value);
  return extensions;
}

}  // namespace pipetune::models

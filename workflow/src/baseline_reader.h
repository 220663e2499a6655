// Typed reads of a baseline file's keys, with errors naming the file and
// the key: the baseline's own parser (baseline.cc) and each kind's settings
// section (adapter.h) read through it. Private to the workflow.
#pragma once

#include <fmt/format.h>

#include <string>

#include "pipetune/base/json.h"
#include "pipetune/base/status.h"

namespace pipetune::workflow::internal {

struct Reader {
  const std::string& source;
  Status Error(const std::string& key, const std::string& what) const {
    return InvalidInput(fmt::format("{}: baseline key \"{}\": {}", source, key, what));
  }
  StatusOr<const Json*> Field(const Json& object, const std::string& key, const std::string& path,
                              Json::value_t type) const {
    if (!object.is_object() || !object.contains(key)) return Error(path, "missing");
    const Json& value = object.at(key);
    bool ok = value.type() == type || (type == Json::value_t::number_float && value.is_number()) ||
              (type == Json::value_t::number_integer && value.is_number_integer());
    if (!ok)
      return Error(path, fmt::format("expected {}, got {}", Json(type).type_name(), value.type_name()));
    return &value;
  }
  StatusOr<double> Number(const Json& object, const std::string& key, const std::string& path) const {
    PIPETUNE_ASSIGN_OR_RETURN(const Json* value, Field(object, key, path, Json::value_t::number_float));
    return value->get<double>();
  }
  StatusOr<std::string> String(const Json& object, const std::string& key, const std::string& path) const {
    PIPETUNE_ASSIGN_OR_RETURN(const Json* value, Field(object, key, path, Json::value_t::string));
    return value->get<std::string>();
  }
  StatusOr<const Json*> Array(const Json& object, const std::string& key, const std::string& path) const {
    return Field(object, key, path, Json::value_t::array);
  }
};

}  // namespace pipetune::workflow::internal

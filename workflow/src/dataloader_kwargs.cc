// A DataLoader's keyword arguments file (dataloader_kwargs.h): checked when read,
// written from a plan's configuration, where it goes, and the code change it stands for.
#include "pipetune/workflow/dataloader_kwargs.h"

#include <fmt/format.h>

#include <filesystem>

#include "pipetune/base/files.h"
#include "pipetune/base/json.h"
#include "pipetune/models/knob_values.h"

namespace pipetune::workflow {
namespace fs = std::filesystem;

namespace {

// The keyword arguments of one object of a kwargs file; `where` names it in
// errors ("" at the top, "ranks"."1". for a rank's own).
Status CheckKwargs(const Json& kwargs, const std::string& path, const std::string& where) {
  for (const auto& [key, value] : kwargs.items()) {
    if (key == "num_workers" || key == "prefetch_factor" || key == "fetch_threads") {
      if (value.is_null() && key == "prefetch_factor") continue;
      if (!value.is_number_integer() || value.get<int64_t>() < (key == "num_workers" ? 0 : 1)) {
        return InvalidInput(fmt::format("{}: key {}\"{}\": expected an integer >= {}, got {}", path, where,
                                        key, key == "num_workers" ? 0 : 1, value.dump()));
      }
    } else if (key == "persistent_workers" || key == "pin_memory") {
      if (!value.is_boolean()) {
        return InvalidInput(
            fmt::format("{}: key {}\"{}\": expected true or false, got {}", path, where, key, value.dump()));
      }
    } else if (key == "ranks" && where.empty()) {
      // A job's plan that sets some ranks apart (docs/distributed.md).
      if (!value.is_object()) {
        return InvalidInput(
            fmt::format("{}: key \"ranks\": expected an object of rank numbers, got {}", path, value.dump()));
      }
      for (const auto& [rank, entry] : value.items()) {
        if (rank.empty() || rank.find_first_not_of("0123456789") != std::string::npos || !entry.is_object()) {
          return InvalidInput(fmt::format(
              "{}: key \"ranks\".\"{}\": expected a rank number and an object of keyword arguments", path,
              rank));
        }
        PIPETUNE_RETURN_IF_ERROR(CheckKwargs(entry, path, fmt::format("\"ranks\".\"{}\".", rank)));
      }
    } else {
      return InvalidInput(
          fmt::format("{}: key {}\"{}\": not a DataLoader setting pipetune applies (num_workers, "
                      "prefetch_factor, persistent_workers, pin_memory, fetch_threads{})",
                      path, where, key, where.empty() ? "; ranks" : ""));
    }
  }
  return Status::Ok();
}

}  // namespace

StatusOr<Json> ReadDataLoaderKwargs(const std::string& path) {
  PIPETUNE_ASSIGN_OR_RETURN(std::string text, ReadFile(path, "the DataLoader settings"));
  Json j = Json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) {
    return InvalidInput(fmt::format("{}: expected a JSON object of DataLoader keyword arguments", path));
  }
  const Json& kwargs = j.contains("dataloader_kwargs") ? j["dataloader_kwargs"] : j;
  PIPETUNE_RETURN_IF_ERROR(CheckKwargs(kwargs, path, ""));
  return kwargs;
}

StatusOr<ProgramSettings> DataLoaderSettingsFile(const std::string& path) {
  PIPETUNE_RETURN_IF_ERROR(ReadDataLoaderKwargs(path).status());
  std::error_code error;
  return ProgramSettings("PIPETUNE_DATALOADER_APPLY", fs::absolute(path, error).string());
}

std::string DataLoaderKwargsPath(const std::string& requested, const std::string& trace) {
  if (!requested.empty()) return requested;
  fs::path p(trace);
  return (p.parent_path() / (p.stem().string() + ".dataloader.json")).string();
}

Json DataLoaderKwargs(const models::Profile& profile, const models::Configuration& config) {
  Json kwargs = models::KnobValues(profile, config);
  // torch refuses a prefetch_factor or persistent workers without workers:
  // the model keeps a buffer and a persistence for 0 workers, the kwargs not.
  if (kwargs.value("num_workers", 0) == 0) {
    kwargs["prefetch_factor"] = Json();
    kwargs["persistent_workers"] = false;
  }
  return kwargs;
}

std::string DataLoaderCodeChange(const Json& kwargs) {
  auto flag = [&](const char* key) { return kwargs.value(key, false) ? "True" : "False"; };
  const int workers = kwargs.value("num_workers", 0);
  // Fetch threads are pipetune's wrapper around the dataset, not a DataLoader argument.
  const int threads = kwargs.value("fetch_threads", 1);
  const std::string dataset =
      threads > 1 ? fmt::format("pipetune.concurrent_fetch(dataset, {})", threads) : std::string("dataset");
  if (workers == 0)
    return fmt::format("DataLoader({}, ..., num_workers=0, pin_memory={})", dataset, flag("pin_memory"));
  return fmt::format(
      "DataLoader({}, ..., num_workers={}, prefetch_factor={}, persistent_workers={}, pin_memory={})",
      dataset, workers, kwargs.value("prefetch_factor", 2), flag("persistent_workers"), flag("pin_memory"));
}

}  // namespace pipetune::workflow

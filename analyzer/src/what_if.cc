// Parsing and answering what-if questions (what_if.h).
#include "pipetune/analyzer/what_if.h"

#include <fmt/format.h>

#include <charconv>
#include <cmath>
#include <string>
#include <vector>

#include "pipetune/base/json.h"
#include "pipetune/models/knob_values.h"

namespace pipetune::analyzer {
namespace {

std::string_view Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

std::optional<double> ParseNumber(std::string_view s) {
  double value = 0;
  auto [end, error] = std::from_chars(s.data(), s.data() + s.size(), value);
  if (error != std::errc() || end != s.data() + s.size() || !std::isfinite(value)) return std::nullopt;
  return value;
}

std::optional<bool> ParseBool(std::string_view s) {
  if (s == "true" || s == "True" || s == "1") return true;
  if (s == "false" || s == "False" || s == "0") return false;
  return std::nullopt;
}

std::optional<int> ParseInt(std::string_view s) {
  int value = 0;
  auto [end, error] = std::from_chars(s.data(), s.data() + s.size(), value);
  if (error != std::errc() || end != s.data() + s.size()) return std::nullopt;
  return value;
}

Status Bad(std::string_view text, std::string_view what) {
  return InvalidInput(fmt::format(
      "what-if \"{}\": {} (expected cores=N, cores=+N, STAGE.parallelism=N, cache=STAGE or cache=none, "
      "and for a DataLoader num_workers=N, prefetch_factor=N, fetch_threads=N, persistent_workers=BOOL, "
      "pin_memory=BOOL, separated by commas)",
      text, what));
}

Status ParseChange(std::string_view text, std::string_view change, WhatIf& what_if) {
  size_t equals = change.find('=');
  if (equals == std::string_view::npos) return Bad(text, fmt::format("\"{}\" has no '='", change));
  std::string_view key = Trim(change.substr(0, equals));
  std::string_view value = Trim(change.substr(equals + 1));
  if (key == "cores") {
    bool relative = !value.empty() && value.front() == '+';
    std::optional<double> cores = ParseNumber(relative ? value.substr(1) : value);
    if (!cores || *cores <= 0) return Bad(text, fmt::format("cores must be a number > 0, got \"{}\"", value));
    if (relative) {
      what_if.more_cores += *cores;
    } else {
      what_if.cores = *cores;
    }
    return Status::Ok();
  }
  if (key == "cache") {
    if (value.empty()) return Bad(text, "cache needs a stage name (or none)");
    if (value == "none") {
      what_if.remove_cache = true;
      what_if.cache_after.reset();
    } else {
      what_if.cache_after = std::string(value);
      what_if.remove_cache = false;
    }
    return Status::Ok();
  }
  constexpr std::string_view kSuffix = ".parallelism";
  if (key.size() > kSuffix.size() && key.substr(key.size() - kSuffix.size()) == kSuffix) {
    std::optional<int> workers = ParseInt(value);
    if (!workers || *workers < 1) {
      return Bad(text, fmt::format("parallelism must be an integer >= 1, got \"{}\"", value));
    }
    what_if.parallelism.emplace_back(std::string(key.substr(0, key.size() - kSuffix.size())), *workers);
    return Status::Ok();
  }
  if (key == kNumWorkersKnob || key == kPrefetchFactorKnob || key == kFetchThreadsKnob) {
    std::optional<int> number = ParseInt(value);
    int least = key == kNumWorkersKnob ? 0 : 1;
    if (!number || *number < least) {
      return Bad(text, fmt::format("{} must be an integer >= {}, got \"{}\"", key, least, value));
    }
    what_if.named.emplace_back(std::string(key), *number);
    return Status::Ok();
  }
  if (key == kPersistentWorkersKnob || key == kPinMemoryKnob) {
    std::optional<bool> flag = ParseBool(value);
    if (!flag) return Bad(text, fmt::format("{} must be true or false, got \"{}\"", key, value));
    what_if.named.emplace_back(std::string(key), *flag ? 1 : 0);
    return Status::Ok();
  }
  return Bad(text, fmt::format("unknown knob \"{}\"", key));
}

// Sets the group or stage knob called `name` in `config` through the one
// crossing between a configuration and the knobs' names
// (models/knob_values.h); false, with `error` naming the knobs there are,
// when the profile has none by that name.
bool SetNamedKnob(const models::Profile& profile, const std::string& name, int value,
                  models::Configuration& config, std::string* error) {
  const Json knobs = models::KnobValues(profile, config);
  auto found = knobs.find(name);
  if (found == knobs.end()) {
    std::vector<std::string> names;
    for (const auto& [knob, _] : knobs.items()) names.push_back(knob);
    *error = fmt::format(
        "this pipeline has no knob \"{}\" (its named knobs: {})", name,
        names.empty() ? "none: it has no worker groups" : fmt::format("{}", fmt::join(names, ", ")));
    return false;
  }
  for (const models::WorkerGroup& group : profile.groups) {
    if (name == group.workers_knob && value == 0 && !group.may_run_on_consumer) {
      *error = fmt::format("{} cannot run on the consumer's thread: {} must be at least 1", group.name, name);
      return false;
    }
  }
  Json change = Json::object();
  change[name] = found->is_boolean() ? Json(value != 0) : Json(value);
  config = models::WithKnobValues(profile, config, change);
  return true;
}

std::string StageList(const models::Profile& profile) {
  std::vector<std::string> names;
  for (const models::StageProfile& stage : profile.stages) names.push_back(stage.name);
  return fmt::format("{}", fmt::join(names, ", "));
}

}  // namespace

StatusOr<WhatIf> ParseWhatIf(std::string_view text) {
  WhatIf what_if;
  what_if.text = std::string(Trim(text));
  if (what_if.text.empty()) return Bad(text, "empty");
  std::string_view rest = what_if.text;
  while (!rest.empty()) {
    size_t comma = rest.find(',');
    std::string_view change = Trim(rest.substr(0, comma));
    if (change.empty()) return Bad(text, "an empty change between commas");
    PIPETUNE_RETURN_IF_ERROR(ParseChange(what_if.text, change, what_if));
    if (comma == std::string_view::npos) break;
    rest.remove_prefix(comma + 1);
  }
  return what_if;
}

StatusOr<models::Configuration> ApplyWhatIf(const models::Profile& profile, const WhatIf& what_if) {
  models::Configuration config = models::ObservedConfiguration(profile);
  if (what_if.cores) config.cores = *what_if.cores;
  config.cores += what_if.more_cores;
  for (const auto& [name, workers] : what_if.parallelism) {
    std::optional<size_t> index = profile.FindStage(name);
    if (!index) {
      return InvalidInput(fmt::format("what-if \"{}\": the pipeline has no stage \"{}\" (stages: {})",
                                      what_if.text, name, StageList(profile)));
    }
    if (const std::optional<size_t>& group = profile.stages[*index].group; group) {
      const models::WorkerGroup& g = profile.groups[*group];
      return InvalidInput(
          fmt::format("what-if \"{}\": stage \"{}\" runs in the {} with the group's other stages: "
                      "ask for {}=N",
                      what_if.text, name, g.name, g.workers_knob.empty() ? "workers" : g.workers_knob));
    }
    if (!profile.stages[*index].parallel) {
      return InvalidInput(
          fmt::format("what-if \"{}\": stage \"{}\" ({}) has no workers to add; only map and "
                      "read_file stages have a parallelism",
                      what_if.text, name, profile.stages[*index].op_name));
    }
    config.parallelism[*index] = workers;
  }
  for (const auto& [name, value] : what_if.named) {
    std::string error;
    if (!SetNamedKnob(profile, name, value, config, &error)) {
      return InvalidInput(fmt::format("what-if \"{}\": {}", what_if.text, error));
    }
  }
  if (what_if.remove_cache) config.cache_after.reset();
  if (what_if.cache_after) {
    std::optional<size_t> index = profile.FindStage(*what_if.cache_after);
    if (!index) {
      return InvalidInput(fmt::format("what-if \"{}\": the pipeline has no stage \"{}\" (stages: {})",
                                      what_if.text, *what_if.cache_after, StageList(profile)));
    }
    config.cache_after = *index;
  }
  return config;
}

StatusOr<WhatIfOutcome> EvaluateWhatIf(const models::Profile& profile, const WhatIf& what_if) {
  PIPETUNE_ASSIGN_OR_RETURN(models::Configuration config, ApplyWhatIf(profile, what_if));
  WhatIfOutcome outcome;
  outcome.question = what_if.text;
  if (what_if.cache_after) {
    size_t index = *config.cache_after;
    outcome.cache_bytes = models::CacheBytes(profile, index);
    if (std::optional<std::string> why = models::CacheNotAllowed(profile, index)) {
      outcome.allowed = false;
      outcome.note = fmt::format("no cache after {}: {}", *what_if.cache_after, *why);
      return outcome;
    }
    bool existing = profile.cache_stage && *profile.cache_stage == index + 1;
    if (!existing) outcome.note = "the new cache's own cost (copying elements out of it) is taken as zero";
  }
  models::Prediction base = models::Predict(profile, models::ObservedConfiguration(profile));
  models::Prediction prediction = models::Predict(profile, config);
  outcome.throughput = prediction.throughput;
  outcome.speedup = base.throughput > 0 ? prediction.throughput / base.throughput : 0.0;
  outcome.bound = prediction.binding.kind;
  if (prediction.bottleneck_stage) outcome.bottleneck = profile.stages[*prediction.bottleneck_stage].name;
  outcome.cores_used = prediction.cores_used;
  return outcome;
}

}  // namespace pipetune::analyzer

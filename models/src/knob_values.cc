// Configuration <-> the user's knob names (knob_values.h).
#include "pipetune/models/knob_values.h"

#include "pipetune/base/check.h"

namespace pipetune::models {
namespace {

// The configuration's fields behind each named knob, visited in the
// profile's order, so that reading and setting walk one list and cannot
// disagree about which name is which field.
template <typename Config, typename Visit>
void ForEachNamedKnob(const Profile& profile, Config& config, Visit visit) {
  if (config.group_workers.empty() && config.stage_enabled.empty()) return;
  for (size_t g = 0; g < profile.groups.size(); ++g) {
    const WorkerGroup& group = profile.groups[g];
    PIPETUNE_CHECK(g < config.group_workers.size() && g < config.group_buffer.size() &&
                   g < config.group_persistent.size());
    if (!group.workers_knob.empty()) visit.Integer(group.workers_knob, config.group_workers[g]);
    if (!group.buffer_knob.empty()) visit.Integer(group.buffer_knob, config.group_buffer[g]);
    if (!group.persistent_knob.empty()) visit.Flag(group.persistent_knob, config.group_persistent, g);
    if (!group.fetch_threads_knob.empty() && g < config.group_fetch_threads.size())
      visit.Integer(group.fetch_threads_knob, config.group_fetch_threads[g]);
  }
  for (size_t i = 0; i < profile.stages.size(); ++i) {
    const StageProfile& stage = profile.stages[i];
    if (!stage.switchable || stage.switch_knob.empty()) continue;
    PIPETUNE_CHECK(i < config.stage_enabled.size());
    visit.Flag(stage.switch_knob, config.stage_enabled, i);
  }
}

struct Read {
  Json& out;
  void Integer(const std::string& name, int value) { out[name] = value; }
  void Flag(const std::string& name, const std::vector<bool>& flags, size_t i) { out[name] = bool(flags[i]); }
};

struct Write {
  const Json& values;
  void Integer(const std::string& name, int& value) {
    auto found = values.find(name);
    if (found != values.end() && found->is_number_integer()) value = found->get<int>();
  }
  void Flag(const std::string& name, std::vector<bool>& flags, size_t i) {
    auto found = values.find(name);
    if (found != values.end() && found->is_boolean()) flags[i] = found->get<bool>();
  }
};

}  // namespace

Json KnobValues(const Profile& profile, const Configuration& config) {
  Json values = Json::object();
  ForEachNamedKnob(profile, config, Read{values});
  return values;
}

Configuration WithKnobValues(const Profile& profile, Configuration config, const Json& values) {
  if (values.is_object()) ForEachNamedKnob(profile, config, Write{values});
  return config;
}

}  // namespace pipetune::models

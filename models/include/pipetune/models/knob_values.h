// The user's settings a configuration stands for, in the user's words.
//
// A profile may name its knobs (WorkerGroup::workers_knob, buffer_knob,
// persistent_knob; StageProfile::switch_knob): a DataLoader's profile names
// "num_workers", "prefetch_factor", "persistent_workers" and "pin_memory".
// These two functions are the one crossing between a solved Configuration
// and those names, for every kind of run whose profile names its knobs: a
// plan's configuration becomes the settings to write (KnobValues), and a
// set of settings kept elsewhere (a baseline, another rank's plan) becomes a
// configuration to price on a profile (WithKnobValues).
#pragma once

#include "pipetune/base/json.h"
#include "pipetune/models/profile.h"
#include "pipetune/models/rate_model.h"

namespace pipetune::models {

// A JSON object of the named knobs' values in `config`, in the profile's
// order: each group's workers, buffer and persistence (integers, integers,
// booleans), then each switchable stage's switch (a boolean). An unnamed
// knob is left out; a profile naming none gives an empty object.
// PIPETUNE_CHECK: `config` is of `profile` (ObservedConfiguration's shape).
Json KnobValues(const Profile& profile, const Configuration& config);

// `config` with each named knob that `values` holds set to its value; a
// name the profile does not have, or a value of the wrong type, is left as
// it was (a baseline of a run with a pin_memory stage priced on a run
// without one).
Configuration WithKnobValues(const Profile& profile, Configuration config, const Json& values);

}  // namespace pipetune::models

// What an element's hand-off between two stages costs on this host: the
// price of fusing adjacent maps (tuner/fusion.h, ProposeMapFusion). `tune`
// asks it when the traced config has two maps one after the other.
//
// How: the same work runs through the reference engine as two map stages and
// as one chain stage (range -> map -> map against range -> chain), untraced,
// in this process; the difference in the process's CPU time per element is
// what the boundary costs (the upstream worker's push, the downstream
// worker's pop, the wake-ups and context switches between them). The first
// map spins kHandoffProbeWorkUs per element and the second a tenth of it, so
// that, as in a real pipeline whose stages differ in cost, the faster
// downstream worker sleeps on its empty input and is woken for each element
// (with equal fast stages the queues never run dry and hand elements over in
// chunks, which hides most of the cost). The pairs alternate
// kHandoffProbeRounds times and the median difference counts. About 1.5 s of
// wall time on 2 cores.
//
// The figure moves from run to run, and where a fusion's gain sits near the
// tuner's bar the plan flips with it; `tune --handoff-ns N` gives the figure
// instead (HandoffCost), and the plan says which it used.
#pragma once

#include <optional>

#include "pipetune/base/status.h"
#include "pipetune/models/config.h"
#include "pipetune/models/profile.h"

namespace pipetune::workflow {

inline constexpr double kHandoffProbeWorkUs = 100;
inline constexpr int kHandoffProbeElements = 2000;
inline constexpr int kHandoffProbeRounds = 3;

// True when `config` has two map stages one after the other (a fusion to
// price).
bool HasAdjacentMaps(const models::PipelineConfig& config);

// CPU seconds per element per stage boundary, >= 0; nullopt when the probe
// could not run.
std::optional<double> MeasureStageHandoff();

// kInvalidInput naming --handoff-ns unless `given_ns` is unset or a finite
// number >= 0.
Status ValidateGivenHandoff(std::optional<double> given_ns);

// The hand-off cost the plans of one command price a map fusion with: the
// user's figure when given (`--handoff-ns`; the probe never runs), else the
// probe's, measured at the first plan that needs it and reused after (the
// rounds of `tune --verify` share one). `given_ns` must have passed
// ValidateGivenHandoff.
class HandoffCost {
 public:
  explicit HandoffCost(std::optional<double> given_ns) : given_ns_(given_ns) {}

  // Sets `profile`'s hand-off cost (and whether it was given) when `config`
  // has two maps one after the other; leaves it unset otherwise.
  void PriceInto(const models::PipelineConfig& config, models::Profile& profile);

 private:
  std::optional<double> given_ns_;
  std::optional<double> measured_seconds_;
  bool probed_ = false;
};

}  // namespace pipetune::workflow

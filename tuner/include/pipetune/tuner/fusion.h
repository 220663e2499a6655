// Graph rewrites: changes of the pipeline's stages, not of their knobs, that
// the tuner proposes when the model says they pay. One so far: fusing a JPEG
// decode with the random resized crop after it (models/decode_crop.h), so
// that only the crop's window is decoded.
//
// How it is decided: the traced profile is rewritten as if the stages were
// fused (the fused stage priced from the two stages' measured costs and the
// share of the decode a crop needs), the solver plans both pipelines under
// the same budgets, and the rewrite is kept when its plan is better: higher
// throughput by at least kMinRewriteGain, or, for the demand objective, the
// demand met with fewer cores. The plan then carries the rewrite (Plan::
// rewrites, applied by ApplyPlan before the knobs), a "stage" change for each
// stage it touches, and the prediction of the fused pipeline, which
// `tune --verify` measures like any other.
#pragma once

#include <optional>
#include <vector>

#include "pipetune/base/status.h"
#include "pipetune/models/config.h"
#include "pipetune/tuner/plan.h"
#include "pipetune/tuner/solver.h"

namespace pipetune::tuner {

// A rewrite must buy at least this share of throughput to be proposed:
// below it the difference is within the model's error.
inline constexpr double kMinRewriteGain = 0.03;

// GraphRewrite::kind of each rewrite.
inline constexpr const char* kFuseDecodeCrop = "fuse_decode_crop";
inline constexpr const char* kMoveRepeat = "move_repeat";
inline constexpr const char* kFuseMaps = "fuse_maps";

// Completes a fused stage whose per-element CPU and latencies are set: its
// totals over the window, and the output (bytes, visits) of `tail`, the last
// of the stages it replaces. What both fusions share.
void TakeOutputOf(const models::StageProfile& tail, models::StageProfile& fused);

// The traced input as if the rewrite were made: the config and the profile
// with the stages fused. nullopt when the input has no config or no
// decode -> crop pair, or the profile does not name the pair's stages.
struct RewrittenInput {
  TuneInput input;
  GraphRewrite rewrite;  // predicted_gain not yet known
  std::string pricing;   // how the fused stage was priced, for the plan's notes
  // A map fusion whose second stage folds into the first's pass
  // (TuneInput::folds): the same output for less work, kept when its plan is
  // no worse, without kMinRewriteGain.
  bool folds = false;
};
std::optional<RewrittenInput> ProposeDecodeCropFusion(const TuneInput& input);

// The traced input with its repeat moved to right after stage `after` (a
// profile index), so that a cache there holds one epoch and replays it:
// what a repeat right after the source rules out. nullopt unless exactly one
// repeat (and no take) stands between the source and the stage, the input
// has a config and no cache of its own, and a cache after the stage would
// then be allowed (nothing random before it, the epoch's size known). The
// content of every epoch is the same files; their order is kept by the
// shuffle a cache brings where the source reshuffled per epoch (candidate.h).
std::optional<RewrittenInput> ProposeRepeatMove(const TuneInput& input, size_t after);

// The traced input with the maps `first`..`last` (profile indices, adjacent
// in the config, the same on_error) fused into one stage that runs their
// functions in turn (`"fn": "chain"`, runtime/function_registry.h), named as
// the first. The fused stage is priced at the stages' measured CPU and
// latency added, less one hand-off per boundary removed
// (Profile::handoff_cpu_seconds); it is random when any of them is. Two
// stages whose second folds into the first (TuneInput::folds) are marked
// RewrittenInput::folds. nullopt when the profile has no measured hand-off,
// or the stages are not such maps.
std::optional<RewrittenInput> ProposeMapFusion(const TuneInput& input, size_t first, size_t last);

// The config with the maps named `names` (adjacent, in order) made one chain
// stage named as the first; a chain among them is spliced in. What the
// proposal and ApplyRewrites both use. kInvalidInput when the config does not
// have them one after the other.
StatusOr<models::PipelineConfig> FuseMapsInConfig(const models::PipelineConfig& config,
                                                  const std::vector<std::string>& names);

// One search over graph alternatives: the traced pipeline, the decode-crop
// fusion, and each of the two with its repeat moved after a cache point;
// Solve (solver.h) prices each with all of its cache choices under the same
// budgets, and the best plan wins, a rewritten one only when it pays (above;
// a rewrite that only adds folds pays when its plan is no worse).
// The plan's cache options list every alternative's, labelled with its
// rewrites, and its notes say which rewrites were declined and why. Errors as
// Solve's, for the pipeline as traced.
StatusOr<Plan> SolveWithRewrites(const TuneInput& input, const Resources& resources, Objective objective,
                                 const SolverOptions& options = {});

// The config with the rewrites made, in order. Errors (kInvalidInput): a
// rewrite names stages the config does not have in that arrangement (a plan
// of another pipeline).
StatusOr<models::PipelineConfig> ApplyRewrites(const models::PipelineConfig& config,
                                               const std::vector<GraphRewrite>& rewrites);

}  // namespace pipetune::tuner

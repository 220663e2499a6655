// The pipeline the solver searches over, for one cache choice: the traced
// stages, with a prefetch inserted at the end when the run had none, the
// run's own cache removed when the plan may move it, and a cache stage
// inserted where the choice puts one. Its knobs (parallelism, buffers) are
// plain fields; Evaluate, Memory and Threads say what they give and cost.
//
// Public so that the peer algorithms of the quality benchmark (bench/tuner)
// and the tests search the same model as the solver.
#pragma once

#include <string>
#include <vector>

#include "pipetune/base/status.h"
#include "pipetune/models/memory_model.h"
#include "pipetune/models/rate_model.h"
#include "pipetune/tuner/plan.h"

namespace pipetune::tuner {

// CPU and wall seconds per element of a stage the plan inserts (a prefetch or
// a memory cache replaying): a pass-through of the reference runtime.
inline constexpr double kPassThroughSeconds = 2e-6;
// A disk cache replays at about this many seconds per byte of one core
// (read from the page cache and copied out).
inline constexpr double kDiskReplaySecondsPerByte = 1e-9;
// A worker is worth its thread while it adds at least this share of one
// worker's throughput. Linear scaling always does; a fitted curve that
// flattens (a lock inside the function) stops where it no longer does, rather
// than chasing its asymptote with every thread the budget allows (and the fit
// is least trustworthy far beyond the measured levels).
inline constexpr double kMinWorkerGain = 0.05;
// Bytes a buffered element costs beyond its payload when its payload is
// shared with a memory cache (the element's own record: ids, shape, the
// shared pointer): what a shuffle after a memory cache holds per element.
inline constexpr double kSharedElementBytes = 128;

// The workers beyond which each adds less than kMinWorkerGain of one worker's
// throughput (or the throughput falls, past a USL peak), from the stage's
// scaling fit; 0 when every worker adds a full one (linear scaling).
int UsefulParallelism(const models::StageProfile& stage);

struct Candidate {
  CacheChoice choice;
  std::vector<PlannedStage> stages;
  // The model's view: one StageProfile per entry of `stages` (inserted ones
  // synthesised), visit ratios consistent with the inserted stages.
  models::Profile profile;
  std::optional<size_t> cache_after;  // index into `stages`
  std::optional<size_t> cache_stage;  // index into `stages`
  std::vector<std::string> removed_stages;
  std::vector<std::string> notes;  // e.g. why the run's cache stays where it is
};

// The cache choices worth evaluating: none, and for each admissible stage a
// memory cache and (with a disk directory) a disk cache. An inadmissible
// point is reported in `rejected` ("after \"augment\": stage ... is random").
std::vector<CacheChoice> CacheChoices(const TuneInput& input, const Resources& resources,
                                      std::vector<CacheOption>* rejected);

// Builds the candidate for `choice`, every knob at its minimum (parallelism 1,
// buffers 1), cached stages marked. kInvalidInput when the choice is not
// admissible (the message says why).
StatusOr<Candidate> MakeCandidate(const TuneInput& input, const Resources& resources,
                                  const CacheChoice& choice);

// The configuration the rate model predicts for: the candidate's knobs, the
// budgets' cores and storage bandwidth, the profile's step time.
models::Configuration CandidateConfiguration(const Candidate& candidate, const Resources& resources);
models::Prediction Evaluate(const Candidate& candidate, const Resources& resources);
models::MemoryEstimate Memory(const Candidate& candidate);
int Threads(const Candidate& candidate);

// "no cache", "memory cache after \"decode\"", "disk cache after \"decode\"".
std::string DescribeChoice(const TuneInput& input, const CacheChoice& choice);

// Fills a plan from a finished candidate: knobs with old and new values,
// predictions, memory, threads. Reasons are left to the caller (the solver's
// are specific); knobs get a generic one when the caller leaves it empty.
Plan PlanFromCandidate(const TuneInput& input, const Resources& resources, Objective objective,
                       const Candidate& candidate);

}  // namespace pipetune::tuner

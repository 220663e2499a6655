// The pipeline the solver searches over, for one cache choice: the traced
// stages, with a prefetch inserted at the end when the run had none, the
// run's own cache removed when the plan may move it, and a cache stage
// inserted where the choice puts one. Its knobs (parallelism, buffers, and
// for a profile with worker groups each group's workers, buffer and
// persistence and whether a switchable stage runs) are plain fields;
// Evaluate, Memory and Threads say what they give and cost.
//
// Public so that the peer algorithms of the quality benchmark (bench/tuner)
// and the tests search the same model as the solver.
#pragma once

#include <array>
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
// The most outputs one worker of a group may hold ready that a plan tries
// (a DataLoader's prefetch_factor).
inline constexpr int kMaxWorkerBuffer = 8;
// The fetch threads a plan may give each worker (WorkerGroup::fetch_threads):
// the divisors of common batch sizes, since an output's samples are read in
// rounds of that many, up to 32 reads in flight per process.
inline constexpr int kFetchThreadChoices[] = {1, 2, 3, 4, 6, 8, 12, 16, 24, 32};

// The workers beyond which each adds less than kMinWorkerGain of one worker's
// throughput (or the throughput falls, past a USL peak), from the stage's
// scaling fit; 0 when every worker adds a full one (linear scaling).
int UsefulParallelism(const models::StageProfile& stage);

struct Candidate {
  CacheChoice choice;
  std::vector<PlannedStage> stages;
  std::vector<PlannedGroup> groups;  // one per profile.groups entry
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
// buffers 1), cached stages marked; worker groups and switchable stages as
// traced. A profile with worker groups gets no prefetch inserted: each
// worker's buffer is its prefetch. kInvalidInput when the choice is not
// admissible (the message says why).
StatusOr<Candidate> MakeCandidate(const TuneInput& input, const Resources& resources,
                                  const CacheChoice& choice);

// The configuration the rate model predicts for: the candidate's knobs, the
// budgets' cores and storage bandwidth, the profile's step time.
models::Configuration CandidateConfiguration(const Candidate& candidate, const Resources& resources);
models::Prediction Evaluate(const Candidate& candidate, const Resources& resources);
// With worker groups: the processes (the consumer's and each worker's) and
// the outputs the workers hold (models::WorkerMemoryBytes), in place of the
// stages' queues, which a DataLoader does not have.
models::MemoryEstimate Memory(const Candidate& candidate);
// With worker groups: the consumer's thread and one per worker.
int Threads(const Candidate& candidate);

// Every setting of the first worker group the search tries, as copies of
// `traced` (MakeCandidate's, for a profile with groups) with its knobs set:
// workers 0 (where the group may run on the consumer's thread) to
// `max_workers` (or the group's own max_workers, when lower: more would
// sit idle), each worker's buffer 1 to kMaxWorkerBuffer, persistence
// both ways (when the group has a persistence knob), and each switchable
// stage off where the profile allows it. Further groups keep their traced
// settings (the profiles this serves have one). Empty without groups.
std::vector<Candidate> GroupSettings(const Candidate& traced, int max_workers);

// How far a candidate's settings depart from the traced run, the search's
// tie-break, least first: the groups' workers, a buffer away from the traced
// one (below it counts double: it is taken only where memory forces),
// persistence changed, switchable stages not in their preferred state (off
// where the profile allows it: such a stage only costs time, and a plan
// that kept it would contradict the report). All zero without groups.
std::array<int, 5> Departure(const Candidate& candidate);

// "no cache", "memory cache after \"decode\"", "disk cache after \"decode\"".
std::string DescribeChoice(const TuneInput& input, const CacheChoice& choice);

}  // namespace pipetune::tuner

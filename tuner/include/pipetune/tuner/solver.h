// The solver: profile + budgets + objective -> plan, exact under the rate
// model (docs/tuner.md has the argument).
//
// For every admissible cache choice (none; memory or disk after each stage
// that may be cached) it finds the highest throughput X any integer
// parallelism reaches within the budgets, then picks the best choice for the
// objective. For one choice:
//
//  - the bounds that do not depend on parallelism (CPU, storage, demand,
//    sequential stages) give an upper limit U;
//  - the throughput a configuration reaches is min(U, f_i(p_i)) over the
//    parallel stages, where f_i(p) = p / (V_i L_i(p)) is stage i's Little's-law
//    bound (L_i(p) from its fitted scaling curve);
//  - so the optimum is one of the finite set {U} u {f_i(p)}; for a target X
//    the cheapest configuration gives each stage the least p with
//    f_i(p) >= X, and threads and memory only grow with p, so "X is
//    reachable within the budgets" is monotone in X and a binary search over
//    the sorted candidate values finds the optimum exactly.
//
// A profile with worker groups (a PyTorch DataLoader) has no cache choice and
// no parallel stage; its alternatives are the groups' settings instead
// (GroupSettings, candidate.h), each priced by the same model, memory and
// thread accounting, and picked by the same rule: the highest throughput
// (or, for demand, the consumer's rate), ties within tie_tolerance to the
// least departure from the traced settings (Departure), then the fewest
// cores, the least memory, the fewest threads.
//
// The plan never exceeds a budget: cores (the CPU bound is one of the
// bounds), memory (buffers, in-flight elements, state and a memory cache,
// estimated by the memory model) and threads. Once X is fixed, what budget is
// left buys headroom: workers so that no stage is busier than the utilisation
// target, workers for cached stages to fill the cache quickly, and a prefetch
// buffer from the queue model. None of these lowers X.
#pragma once

#include "pipetune/base/status.h"
#include "pipetune/tuner/candidate.h"
#include "pipetune/tuner/plan.h"

namespace pipetune::tuner {

struct SolverOptions {
  // No stage's workers busier than this share of the time after tuning, where
  // threads and memory allow (Little's law at 100% leaves no room for
  // variance). The demand objective aims at demand / utilisation_target.
  double utilisation_target = 0.9;
  // The same for CPU-bound stages when the cores are what binds: their
  // workers are time-sliced with every other thread, so a worker's element
  // takes longer than its CPU time, and the cores idle whenever too few
  // workers are runnable. Two-thirds busy keeps enough of them ready (on the
  // quality benchmark's CPU-bound chains the grid search's best agrees).
  double cpu_bound_utilisation_target = 0.67;
  // The same for latency-bound stages (workers that wait: storage, a remote
  // service). Their workers cost a thread and next to no CPU, while too few
  // of them cap throughput outright whenever X was estimated low (the CPU
  // per element a one-worker trace shows includes the waiting threads'
  // wake-ups, more than many workers pay). The asymmetry buys more slack:
  // on the quality benchmark's remote_io pipeline, sizing for X / 0.9 gave
  // 0.89 of the grid search's best on a quiet machine, X / 0.75 matches it.
  double latency_bound_utilisation_target = 0.75;
  // Cache choices whose throughput is within this share of the best count as
  // equal; among them the fewest cores, then the least memory win.
  double tie_tolerance = 0.01;
  // Within one cache choice, the plan may take the fewest workers that reach
  // this share of the optimum instead of the optimum itself. 0: exact.
  double throughput_tolerance = 0;
  double stall_probability = 0.01;  // the queue model's target for the last buffer
  int64_t max_prefetch_buffer = 128;
  // The passes after X is fixed (headroom, cache fill workers, buffer depth).
  // Off: every knob at the least value that reaches X (what tests compare
  // with a brute-force search).
  bool spend_leftover_budget = true;
  // Only the caches right after the stage of this name are choices (a graph
  // alternative that exists for one cache point: a repeat moved after it,
  // fusion.h). The cache-less plan is still solved, for the workers that fill
  // the cache, but not offered. Empty: every admissible cache point.
  std::string only_cache_after;
  // Worker groups: the most workers a setting tries.
  int max_group_workers = 32;
};

// Errors (kInvalidInput): budgets that make no sense (cores or memory <= 0,
// fewer threads than stages); no configuration fits, with the reason for
// each cache choice (e.g. "with every stage at one worker the buffers hold
// 600 MiB of the 512 MiB budget").
StatusOr<Plan> Solve(const TuneInput& input, const Resources& resources, Objective objective,
                     const SolverOptions& options = {});

// The exact search for one candidate (every knob of `candidate` at its
// minimum, as MakeCandidate builds it): returns the highest feasible X and
// sets each parallel stage to the least parallelism that reaches
// X (1 - tolerance).
// kInvalidInput, saying why, when even the minimum is over a budget.
StatusOr<double> MaximiseThroughput(Candidate& candidate, const Resources& resources, double tolerance = 0);

}  // namespace pipetune::tuner

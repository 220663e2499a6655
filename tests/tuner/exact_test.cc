// The solver against a brute-force search over every integer parallelism and
// every cache choice, on small random instances; and its plans against every
// budget on random profiles.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <map>
#include <random>

#include "pipetune/tuner/plan_report.h"
#include "pipetune/tuner/solver.h"
#include "test_profiles.h"

namespace pipetune::tuner {
namespace {

using testing::MakeInput;
using testing::StageCost;

struct Instance {
  TuneInput input;
  Resources resources;
  std::string description;
};

// A random pipeline: a source (finite or not), two or three maps (CPU- or
// latency-bound, linear or not), maybe a batch, maybe a repeat after the maps,
// maybe a random stage; random budgets, tight enough that memory and threads
// often bind.
Instance RandomInstance(std::mt19937& rng) {
  auto uniform = [&](double lo, double hi) { return std::uniform_real_distribution<double>(lo, hi)(rng); };
  auto coin = [&](double p) { return std::bernoulli_distribution(p)(rng); };
  int maps = std::uniform_int_distribution<int>(2, 3)(rng);
  bool finite = coin(0.6), repeat = coin(0.7), batch = coin(0.4);
  int random_stage = coin(0.3) ? std::uniform_int_distribution<int>(0, maps - 1)(rng) : -1;
  std::string stages =
      fmt::format(R"({{"name": "src", "op": "range"{}}})", finite ? R"(, "args": {"count": 200})" : "");
  std::map<std::string, StageCost> costs;
  const double sizes[] = {1e3, 1e5, 1e6};
  for (int m = 0; m < maps; ++m) {
    std::string name = fmt::format("m{}", m);
    stages += fmt::format(R"(, {{"name": "{}", "op": "map", "fn": "cpu_work", "args": {{"us": 1}}{}}})", name,
                          m == random_stage ? R"(, "random": true)" : "");
    StageCost cost;
    cost.cpu_ms = uniform(0.05, 4.0);
    cost.wall_ms = coin(0.3) ? cost.cpu_ms * uniform(3, 30) : cost.cpu_ms;
    cost.bytes = sizes[std::uniform_int_distribution<int>(0, 2)(rng)];
    if (coin(0.3)) {  // contention: per-worker latency grows with workers
      double sigma = uniform(0.05, 0.6), kappa = coin(0.5) ? uniform(0.0, 0.05) : 0.0;
      for (int p : {2, 4})
        cost.scaling.push_back({p, cost.wall_ms * (1 + sigma * (p - 1) + kappa * p * (p - 1))});
    }
    costs[name] = cost;
  }
  if (repeat) stages += R"(, {"name": "rep", "op": "repeat"})";
  if (batch) stages += R"(, {"name": "batch", "op": "batch", "args": {"size": 4}})";
  std::string consumer =
      coin(0.4) ? fmt::format(R"(, "consumer": {{"step_time_ms": {:.3f}}})", uniform(0.2, 5)) : "";
  std::string json = fmt::format(R"({{"name": "random", "stages": [{}]{}}})", stages, consumer);

  Instance instance;
  double cores = std::uniform_int_distribution<int>(1, 6)(rng);
  instance.input = MakeInput(json, costs, cores, 100);
  instance.resources.cores = cores;
  int stage_count = maps + 2 + (repeat ? 1 : 0) + (batch ? 1 : 0);  // + source + inserted prefetch
  instance.resources.max_threads = stage_count + std::uniform_int_distribution<int>(0, 6)(rng);
  instance.resources.memory_bytes = static_cast<uint64_t>(std::exp(uniform(std::log(1e6), std::log(2e9))));
  if (coin(0.3)) instance.resources.disk_cache_dir = "/tmp/pipetune_cache";
  instance.description = json + fmt::format(" cores {} threads {} memory {}", cores,
                                            instance.resources.max_threads, instance.resources.memory_bytes);
  return instance;
}

// Every parallelism vector of the stages the solver may set (parallel and not
// cached), each from 1 to the thread limit (or the stage's useful
// parallelism): the best throughput within the budgets, or -1 when nothing fits.
double BruteForce(Candidate candidate, const Resources& resources) {
  std::vector<size_t> knobs;
  for (size_t i = 0; i < candidate.stages.size(); ++i) {
    if (candidate.stages[i].parallel && !candidate.stages[i].cached) knobs.push_back(i);
  }
  double best = -1;
  std::function<void(size_t)> visit = [&](size_t k) {
    if (k == knobs.size()) {
      if (Threads(candidate) > resources.max_threads) return;
      if (Memory(candidate).Total() > static_cast<double>(resources.memory_bytes)) return;
      best = std::max(best, Evaluate(candidate, resources).throughput);
      return;
    }
    int useful = candidate.stages[knobs[k]].useful_parallelism;
    int most = useful > 0 ? std::min(useful, resources.max_threads) : resources.max_threads;
    for (int p = 1; p <= most; ++p) {
      candidate.stages[knobs[k]].parallelism = p;
      if (Threads(candidate) > resources.max_threads) break;
      visit(k + 1);
    }
    candidate.stages[knobs[k]].parallelism = 1;
  };
  visit(0);
  return best;
}

double BruteForceAllChoices(const Instance& instance) {
  double best = -1;
  for (const CacheChoice& choice : CacheChoices(instance.input, instance.resources, nullptr)) {
    StatusOr<Candidate> candidate = MakeCandidate(instance.input, instance.resources, choice);
    if (candidate.ok()) best = std::max(best, BruteForce(*candidate, instance.resources));
  }
  return best;
}

TEST(ExactSolver, MatchesBruteForceOnEveryCandidate) {
  std::mt19937 rng(20240501);
  int compared = 0;
  for (int trial = 0; trial < 150; ++trial) {
    Instance instance = RandomInstance(rng);
    for (const CacheChoice& choice : CacheChoices(instance.input, instance.resources, nullptr)) {
      StatusOr<Candidate> made = MakeCandidate(instance.input, instance.resources, choice);
      if (!made.ok()) continue;
      double brute = BruteForce(*made, instance.resources);
      Candidate searched = *made;
      StatusOr<double> exact = MaximiseThroughput(searched, instance.resources);
      if (brute < 0) {
        EXPECT_FALSE(exact.ok()) << instance.description;
        continue;
      }
      ASSERT_TRUE(exact.ok()) << exact.status().message() << "\n" << instance.description;
      EXPECT_NEAR(*exact, brute, brute * 1e-9) << instance.description;
      // The search leaves the candidate at a configuration that reaches it.
      EXPECT_NEAR(Evaluate(searched, instance.resources).throughput, brute, brute * 1e-9)
          << instance.description;
      ++compared;
    }
  }
  EXPECT_GT(compared, 200);
}

TEST(ExactSolver, PlanMatchesBruteForceOverAllCacheChoices) {
  std::mt19937 rng(7);
  SolverOptions exact;
  exact.spend_leftover_budget = false;
  exact.tie_tolerance = 0;
  exact.throughput_tolerance = 0;
  std::map<models::BoundKind, int> bindings;
  int cached = 0, thread_limited = 0, memory_limited = 0;
  for (int trial = 0; trial < 100; ++trial) {
    Instance instance = RandomInstance(rng);
    double brute = BruteForceAllChoices(instance);
    StatusOr<Plan> plan = Solve(instance.input, instance.resources, Objective::kMax, exact);
    if (brute < 0) {
      EXPECT_FALSE(plan.ok()) << instance.description;
      continue;
    }
    ASSERT_TRUE(plan.ok()) << plan.status().message() << "\n" << instance.description;
    EXPECT_NEAR(plan->predicted_throughput, brute, brute * 1e-9) << instance.description << "\n"
                                                                 << FormatPlanText(*plan);
    ++bindings[plan->binding];
    if (plan->cache_stage) ++cached;
    for (const CacheOption& option : plan->cache_options) {
      if (option.note.find("threads") != std::string::npos) ++thread_limited;
      if (option.note.find("memory") != std::string::npos) ++memory_limited;
    }
  }
  // The instances exercise every kind of limit.
  EXPECT_GT(bindings[models::BoundKind::kCpu], 0);
  EXPECT_GT(bindings[models::BoundKind::kConcurrency], 0);
  EXPECT_GT(cached, 0);
  EXPECT_GT(thread_limited, 0);
  EXPECT_GT(memory_limited, 0);
}

TEST(ExactSolver, PlansNeverExceedABudgetAndKeepTheOptimum) {
  std::mt19937 rng(99);
  int solved = 0, refused = 0;
  for (int trial = 0; trial < 150; ++trial) {
    Instance instance = RandomInstance(rng);
    double brute = BruteForceAllChoices(instance);
    for (Objective objective : {Objective::kMax, Objective::kDemand}) {
      StatusOr<Plan> plan = Solve(instance.input, instance.resources, objective);
      if (!plan.ok()) {
        EXPECT_LT(brute, 0) << plan.status().message() << "\n" << instance.description;
        EXPECT_NE(plan.status().message().find("no configuration fits"), std::string::npos);
        ++refused;
        continue;
      }
      ++solved;
      const Resources& r = instance.resources;
      EXPECT_LE(plan->threads, r.max_threads) << instance.description;
      EXPECT_LE(plan->memory.Total(), static_cast<double>(r.memory_bytes)) << instance.description;
      EXPECT_LE(plan->cores_used, r.cores * (1 + 1e-9)) << instance.description;
      EXPECT_LE(plan->cores_needed, std::ceil(r.cores)) << instance.description;
      if (objective == Objective::kMax) {
        // Leftover budget is spent without lowering X; cache choices within 1% tie.
        EXPECT_GE(plan->predicted_throughput, brute * (1 - 0.01) * (1 - 1e-9)) << instance.description;
      } else if (plan->demand_throughput && brute >= *plan->demand_throughput) {
        EXPECT_TRUE(plan->demand_met) << instance.description;
      }
    }
  }
  EXPECT_GT(solved, 100);
  EXPECT_GT(refused, 0);
}

}  // namespace
}  // namespace pipetune::tuner

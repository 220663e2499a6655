// The solver against a brute-force search over every integer parallelism and
// every cache choice, on small random instances; and its plans against every
// budget on random profiles. Worker groups: exact_group_test.cc.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <map>
#include <random>

#include "pipetune/models/decode_crop.h"
#include "pipetune/tuner/fusion.h"
#include "pipetune/tuner/plan_report.h"
#include "pipetune/tuner/solver.h"
#include "test_profiles.h"

namespace pipetune::tuner {
namespace {

using testing::Instance;
using testing::MakeInput;
using testing::StageCost;

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

// Graph alternatives and cache points together. A random image pipeline with
// epochs (list_files, maybe a read, a JPEG decode, a random crop, maybe a
// normalize and a batch), its repeat anywhere after the source, under random
// budgets. The oracle builds every pipeline the tuner may turn it into by
// hand: the repeat at each later place, with and without the decode fused
// with the crop (priced by the model's own formula), profiles each as a
// trace of it would, and brute-forces every cache choice and parallelism of
// each. SolveWithRewrites must reach the oracle's best, or the best without
// any rewrite when no rewrite buys kMinRewriteGain.
struct ImageInstance {
  std::vector<std::string> order;  // stage names, the repeat among them
  std::map<std::string, StageCost> costs;
  bool shuffled = false;
  double handoff_ms = 0;  // what fusing two maps saves per element
  Resources resources;
};

// One map stage's function and args, as the image instance writes it.
Json MapStep(const std::string& name, bool fused) {
  if (name == "decode") {
    return fused ? Json{{"fn", "jpeg_decode"}, {"args", {{"crop_size", 224}}}} : Json{{"fn", "jpeg_decode"}};
  }
  if (name == "augment") return Json{{"fn", "random_crop_flip"}, {"args", {{"size", 224}}}};
  return Json{{"fn", "normalize"}};
}

// `order` names the stages; "a+b" is maps a and b fused into one chain
// stage named a. `fused`: the decode decodes the crop's window (no augment).
std::string ImageJson(const std::vector<std::string>& order, bool shuffled, bool fused) {
  Json stages = Json::array();
  for (const std::string& token : order) {
    std::vector<std::string> maps;
    for (size_t at = 0, plus; at <= token.size(); at = plus + 1) {
      plus = std::min(token.find('+', at), token.size());
      std::string name = token.substr(at, plus - at);
      if (!(fused && name == "augment")) maps.push_back(name);
    }
    if (maps.empty()) continue;
    const std::string& name = maps.front();
    Json stage = {{"name", name}};
    if (name == "files") {
      stage["op"] = "list_files";
      stage["args"] = {{"pattern", "d/*.jpg"}};
      if (shuffled) stage["args"]["shuffle_seed"] = 3;
    } else if (name == "repeat") {
      stage["op"] = "repeat";
    } else if (name == "read") {
      stage["op"] = "read_file";
    } else if (name == "batch") {
      stage["op"] = "batch";
      stage["args"] = {{"size", 4}};
    } else {
      stage["op"] = "map";
      bool random = false;
      for (const std::string& map : maps) random = random || map == "augment" || (fused && map == "decode");
      if (maps.size() == 1) {
        Json step = MapStep(name, fused);
        stage["fn"] = step["fn"];
        if (step.contains("args")) stage["args"] = step["args"];
      } else {
        Json steps = Json::array();
        for (const std::string& map : maps) steps.push_back(MapStep(map, fused));
        stage["fn"] = "chain";
        stage["args"] = {{"steps", steps}};
      }
      if (random) stage["random"] = true;
    }
    stages.push_back(stage);
  }
  return Json{{"name", "image"}, {"stages", stages}}.dump();
}

// The profile a trace of the pipeline would give: the files' count known.
TuneInput ImageProfile(const ImageInstance& instance, const std::vector<std::string>& order, bool fused) {
  std::map<std::string, StageCost> costs = instance.costs;
  if (fused) {
    // The model's price of the fused stage, from the unfused pipeline's.
    TuneInput plain = ImageProfile(instance, instance.order, false);
    std::optional<models::DecodeCropPrice> price =
        models::PriceDecodeCropFusion(*plain.config, plain.profile);
    EXPECT_TRUE(price.has_value());
    const StageCost& decode = instance.costs.at("decode");
    const StageCost& crop = instance.costs.at("augment");
    double cost = price ? price->share.cost : 1;
    costs["decode"] = {
        decode.cpu_ms * cost + crop.cpu_ms, decode.wall_ms * cost + crop.wall_ms, crop.bytes, {}};
  }
  // A chain: the maps' costs added, less the hand-off per boundary removed
  // (the model's price; never below its costliest step), the last's output.
  for (const std::string& token : order) {
    if (token.find('+') == std::string::npos) continue;
    std::vector<std::string> maps;
    for (size_t at = 0, plus; at <= token.size(); at = plus + 1) {
      plus = std::min(token.find('+', at), token.size());
      std::string name = token.substr(at, plus - at);
      if (!(fused && name == "augment")) maps.push_back(name);
    }
    StageCost chain{0, 0, 0, {}};
    double costliest_cpu = 0, costliest_wall = 0;
    for (const std::string& map : maps) {
      chain.cpu_ms += costs.at(map).cpu_ms;
      chain.wall_ms += costs.at(map).wall_ms;
      chain.bytes = costs.at(map).bytes;
      costliest_cpu = std::max(costliest_cpu, costs.at(map).cpu_ms);
      costliest_wall = std::max(costliest_wall, costs.at(map).wall_ms);
    }
    double saved_ms = instance.handoff_ms * static_cast<double>(maps.size() - 1);
    chain.cpu_ms = std::max(chain.cpu_ms - saved_ms, costliest_cpu);
    chain.wall_ms = std::max(chain.wall_ms - saved_ms, costliest_wall);
    costs[maps.front()] = chain;
  }
  TuneInput input =
      MakeInput(ImageJson(order, instance.shuffled, fused), costs, instance.resources.cores, 10);
  input.profile.source_elements_per_epoch = 200;
  input.profile.handoff_cpu_seconds = instance.handoff_ms / 1e3;
  return input;
}

double BruteForceInput(const TuneInput& input, const Resources& resources) {
  Instance instance{input, resources, ""};
  return BruteForceAllChoices(instance);
}

ImageInstance RandomImageInstance(std::mt19937& rng) {
  auto uniform = [&](double lo, double hi) { return std::uniform_real_distribution<double>(lo, hi)(rng); };
  auto coin = [&](double p) { return std::bernoulli_distribution(p)(rng); };
  ImageInstance instance;
  std::vector<std::string> body = {"files"};
  if (coin(0.7)) body.push_back("read");
  body.push_back("decode");
  body.push_back("augment");
  if (coin(0.5)) body.push_back("normalize");
  if (coin(0.4)) body.push_back("batch");
  size_t at = std::uniform_int_distribution<size_t>(1, body.size())(rng);
  instance.order = body;
  instance.order.insert(instance.order.begin() + static_cast<std::ptrdiff_t>(at), "repeat");
  instance.shuffled = coin(0.5);
  double decode_ms = uniform(0.2, 3.0);
  instance.costs["read"] = {0.02, coin(0.3) ? uniform(0.1, 2) : 0.02, 110e3, {}};
  instance.costs["decode"] = {decode_ms, decode_ms, 500 * 375 * 3, {}};
  double crop_ms = uniform(0.05, 0.6);
  instance.costs["augment"] = {crop_ms, crop_ms, 224 * 224 * 3, {}};
  instance.costs["normalize"] = {0.05, 0.05, 224 * 224 * 12, {}};
  // A repeat that costs next to nothing, so that where it stands does not
  // change a pipeline's throughput beyond the comparison's tolerance.
  instance.costs["repeat"] = {1e-7, 1e-7, 0, {}};
  instance.handoff_ms = coin(0.5) ? uniform(0.001, 0.05) : uniform(0.05, 0.5);
  instance.resources.cores = std::uniform_int_distribution<int>(1, 4)(rng);
  instance.resources.max_threads = 9 + std::uniform_int_distribution<int>(0, 4)(rng);
  // The decoded epoch is 200 x 562 KB = 112 MB: budgets on both sides of it.
  instance.resources.memory_bytes = static_cast<uint64_t>(std::exp(uniform(std::log(6e7), std::log(1e9))));
  return instance;
}

TEST(ExactSolver, PlanMatchesBruteForceOverGraphAlternativesAndCachePoints) {
  std::mt19937 rng(2711);
  SolverOptions exact;
  exact.spend_leftover_budget = false;
  exact.tie_tolerance = 0;
  exact.throughput_tolerance = 0;
  int compared = 0, moved = 0, fused = 0, chained = 0, cached = 0, plain_kept = 0;
  for (int trial = 0; trial < 60; ++trial) {
    ImageInstance instance = RandomImageInstance(rng);
    const Resources& resources = instance.resources;
    TuneInput traced = ImageProfile(instance, instance.order, false);
    double plain = BruteForceInput(traced, resources);
    // Every pipeline the tuner may write: the decode fused with the crop or
    // not; no maps or one run of adjacent maps made one stage; the repeat
    // where it is or later.
    double best_rewritten = -1;
    // The tuner fuses a decode right before its crop, as traced.
    auto decode = std::find(instance.order.begin(), instance.order.end(), "decode");
    bool adjacent = decode + 1 != instance.order.end() && *(decode + 1) == "augment";
    auto is_map = [](const std::string& name) {
      return name == "decode" || name == "augment" || name == "normalize";
    };
    for (bool fuse : {false, true}) {
      if (fuse && !adjacent) continue;
      std::vector<std::string> base;
      for (const std::string& name : instance.order) {
        if (!(fuse && name == "augment")) base.push_back(name);
      }
      // (first, last) of the run made one stage; (0, 0): none.
      std::vector<std::pair<size_t, size_t>> runs = {{0, 0}};
      for (size_t first = 0; first < base.size(); ++first) {
        for (size_t last = first + 1; last < base.size() && is_map(base[first]) && is_map(base[last]);
             ++last) {
          runs.push_back({first, last});
        }
      }
      for (auto [first, last] : runs) {
        std::vector<std::string> order;
        for (size_t i = 0; i < base.size(); ++i) {
          if (last > 0 && i > first && i <= last) {
            order.back() += "+" + base[i];
          } else {
            order.push_back(base[i]);
          }
        }
        size_t repeat_at = std::find(order.begin(), order.end(), "repeat") - order.begin();
        for (size_t to = repeat_at; to < order.size(); ++to) {
          if (!fuse && last == 0 && to == repeat_at) continue;  // the traced pipeline
          std::vector<std::string> moved = order;
          moved.erase(moved.begin() + static_cast<std::ptrdiff_t>(repeat_at));
          moved.insert(moved.begin() + static_cast<std::ptrdiff_t>(to), "repeat");
          best_rewritten =
              std::max(best_rewritten, BruteForceInput(ImageProfile(instance, moved, fuse), resources));
        }
      }
    }
    StatusOr<Plan> plan = SolveWithRewrites(traced, resources, Objective::kMax, exact);
    const std::string what =
        fmt::format("{} shuffled {} cores {} threads {} memory {}", fmt::join(instance.order, ","),
                    instance.shuffled, resources.cores, resources.max_threads, resources.memory_bytes);
    if (plain < 0 && best_rewritten < 0) {
      EXPECT_FALSE(plan.ok()) << what;
      continue;
    }
    if (plain < 0) continue;  // only a rewrite fits: the tuner plans the traced pipeline or fails
    ASSERT_TRUE(plan.ok()) << plan.status().message() << "\n" << what;
    // A rewrite is kept when it buys kMinRewriteGain. The oracle may put the
    // repeat further down (after a batch) than the tuner does, which only
    // moves the repeat's own cost.
    double threshold = plain * (1 + kMinRewriteGain);
    // Each rewrite added must pay kMinRewriteGain over the best plan with
    // fewer rewrites, so the plan is within that of the oracle's best.
    if (best_rewritten > threshold * 1.01) {
      EXPECT_LE(plan->predicted_throughput, best_rewritten * (1 + 1e-6)) << what;
      EXPECT_GE(plan->predicted_throughput, best_rewritten / (1 + kMinRewriteGain) * (1 - 1e-6))
          << what << "\n"
          << FormatPlanText(*plan);
    } else if (best_rewritten < threshold * 0.99) {
      EXPECT_NEAR(plan->predicted_throughput, plain, plain * 1e-9) << what << "\n" << FormatPlanText(*plan);
      ++plain_kept;
    } else {
      continue;  // at the threshold: either answer is right
    }
    ++compared;
    for (const GraphRewrite& rewrite : plan->rewrites) {
      moved += rewrite.kind == "move_repeat";
      fused += rewrite.kind == "fuse_decode_crop";
      chained += rewrite.kind == "fuse_maps";
    }
    cached += plan->cache_stage.has_value();
  }
  // The cases exercise every alternative.
  EXPECT_GT(compared, 40);
  EXPECT_GT(moved, 0);
  EXPECT_GT(fused, 0);
  EXPECT_GT(chained, 0);
  EXPECT_GT(cached, 0);
  EXPECT_GT(plain_kept, 0);
}

}  // namespace
}  // namespace pipetune::tuner

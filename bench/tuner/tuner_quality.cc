// The tuner quality benchmark (docs/benchmarks-tuner.md): for
// each pipeline of the suite, started from bad settings, one traced run of
// the start feeds three tuners -- Plumber's policy, tf.data AUTOTUNE's hill
// climb and pipetune's solver -- and a grid search finds the best measured
// config (the oracle). The five configs are then measured side by side,
// round robin, and each is reported as a ratio to the oracle, with the time
// each took to decide. Prints a Markdown table; the ratio line comes last.
//
//   tuner_quality [--seconds S] [--grid-seconds S] [--trace-seconds S]
//                 [--repeats N] [--only NAME] [--markdown FILE]
#include <fmt/format.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "peers.h"
#include "pipetune/base/files.h"
#include "pipetune/models/config.h"
#include "pipetune/tuner/rewrite.h"
#include "pipetune/tuner/solver.h"
#include "pipetune/tuner/tune_input.h"
#include "pipetune/workflow/run.h"
#include "pipetune/workflow/tune.h"
#include "suite.h"

namespace pipetune::bench {
namespace {

using Clock = std::chrono::steady_clock;

struct Flags {
  double seconds = 1.5;        // each measured run of the final comparison
  double grid_seconds = 1.0;   // each run of the oracle's grid search
  double trace_seconds = 3.0;  // the one traced run the tuners decide from
  int repeats = 3;             // round-robin repeats of the final comparison
  std::string only;
  std::string markdown;
};

double Seconds(Clock::time_point begin) {
  return std::chrono::duration<double>(Clock::now() - begin).count();
}

[[noreturn]] void Die(const Status& status, const std::string& where) {
  fmt::print(stderr, "tuner_quality: {}: {}\n", where, status.message());
  std::exit(2);
}

template <typename T>
T OrDie(StatusOr<T> value, const std::string& where) {
  if (!value.ok()) Die(value.status(), where);
  return std::move(value).value();
}

double Measure(const models::PipelineConfig& config, double seconds, const std::string& trace_path = "") {
  workflow::RunConfigOptions options;
  options.seconds = seconds;
  options.trace_path = trace_path;
  return OrDie(workflow::RunConfig(config, options), config.name).throughput;
}

// The start with knobs from the grid: parallelism per axis, a cache after
// `cache_after` when set, a prefetch of 8 at the end (every oracle config has one).
models::PipelineConfig GridConfig(const models::PipelineConfig& start, const std::vector<GridAxis>& grid,
                                  const std::vector<int>& values, const std::string& cache_after) {
  models::PipelineConfig config = start;
  for (size_t a = 0; a < grid.size(); ++a)
    config.stages[*config.FindStage(grid[a].stage)].parallelism = values[a];
  auto insert = [&config](size_t at, const std::string& name, models::Op op) {
    models::StageConfig stage;
    stage.name = name;
    stage.op = op;
    stage.raw = Json{{"name", name}, {"op", models::OpName(op)}};
    if (op == models::Op::kPrefetch) stage.buffer = 8;
    if (op == models::Op::kCache) stage.location = models::CacheLocation::Memory();
    config.stages.insert(config.stages.begin() + static_cast<long>(at), stage);
    for (size_t i = 0; i < config.stages.size(); ++i) config.stages[i].index = i;
  };
  if (!cache_after.empty()) insert(*config.FindStage(cache_after) + 1, "oracle_cache", models::Op::kCache);
  if (config.stages.back().op != models::Op::kPrefetch)
    insert(config.stages.size(), "oracle_prefetch", models::Op::kPrefetch);
  Status valid = models::Validate(config);
  if (!valid.ok()) Die(valid, "grid config");
  return config;
}

struct Oracle {
  models::PipelineConfig config;
  std::string knobs;
  double seconds = 0;
  int runs = 0;
};

Oracle GridSearch(const QualityCase& c, const models::PipelineConfig& start, double seconds) {
  Clock::time_point begin = Clock::now();
  Oracle oracle;
  double best = -1;
  std::vector<std::string> caches = {""};
  caches.insert(caches.end(), c.cache_after.begin(), c.cache_after.end());
  std::vector<int> values(c.grid.size());
  std::function<void(size_t)> visit = [&](size_t axis) {
    if (axis < c.grid.size()) {
      for (int v : c.grid[axis].values) {
        values[axis] = v;
        visit(axis + 1);
      }
      return;
    }
    for (const std::string& cache : caches) {
      models::PipelineConfig config = GridConfig(start, c.grid, values, cache);
      double throughput = Measure(config, seconds);
      ++oracle.runs;
      if (throughput <= best) continue;
      best = throughput;
      oracle.config = config;
      oracle.knobs.clear();
      for (size_t a = 0; a < c.grid.size(); ++a)
        oracle.knobs += fmt::format("{}={} ", c.grid[a].stage, values[a]);
      oracle.knobs += cache.empty() ? "no cache" : "cache after " + cache;
    }
  };
  visit(0);
  oracle.seconds = Seconds(begin);
  return oracle;
}

// "decode=3 augment=2 +cache(decode) prefetch=4": a config's knobs in brief.
std::string Knobs(const models::PipelineConfig& config) {
  std::string text;
  for (size_t i = 0; i < config.stages.size(); ++i) {
    const models::StageConfig& s = config.stages[i];
    if (models::OpIsParallel(s.op)) text += fmt::format("{}={} ", s.name, s.parallelism);
    if (s.op == models::Op::kCache) text += fmt::format("cache({}) ", i > 0 ? config.stages[i - 1].name : "");
    if (s.op == models::Op::kPrefetch) text += fmt::format("prefetch={} ", s.buffer.value_or(1));
  }
  if (!text.empty()) text.pop_back();
  return text;
}

struct Contender {
  std::string name;
  models::PipelineConfig config;
  double decide_seconds = 0;
  std::vector<double> measured;
  double Median() const {
    std::vector<double> sorted = measured;
    std::sort(sorted.begin(), sorted.end());
    size_t n = sorted.size();
    return n == 0 ? 0 : (n % 2 ? sorted[n / 2] : (sorted[n / 2 - 1] + sorted[n / 2]) / 2);
  }
};

struct Row {
  std::string name;
  std::string what;
  std::vector<Contender> contenders;  // start, Plumber, AUTOTUNE, pipetune, oracle
  double oracle_seconds = 0;
  int oracle_runs = 0;
};

Contender Planned(const std::string& name, const models::PipelineConfig& start, double load_seconds,
                  const std::function<StatusOr<tuner::Plan>()>& plan_fn) {
  Clock::time_point begin = Clock::now();
  tuner::Plan plan = OrDie(plan_fn(), name);
  Contender contender{name, OrDie(tuner::ApplyPlan(start, plan), name), load_seconds + Seconds(begin), {}};
  return contender;
}

Row RunCase(const QualityCase& c, const Flags& flags, const std::string& dir) {
  Row row{c.name, c.what, {}, 0, 0};
  models::PipelineConfig start = OrDie(models::ParseConfig(c.config_json, c.name), c.name);
  std::string trace = dir + "/" + c.name + ".ptrace";
  fmt::print(stderr, "{}: tracing the start for {} s\n", c.name, flags.trace_seconds);
  Measure(start, flags.trace_seconds, trace);

  Clock::time_point begin = Clock::now();
  workflow::TracedRun traced = OrDie(workflow::CollectProfile({trace}), trace);
  tuner::Resources resources = OrDie(tuner::ResolveResources(traced.input, traced.Limits(), {}), c.name);
  double load_seconds = Seconds(begin);

  row.contenders.push_back({"start", start, 0, {}});
  row.contenders.push_back(
      Planned("Plumber", start, load_seconds, [&] { return PlumberPlan(traced.input, resources); }));
  row.contenders.push_back(
      Planned("AUTOTUNE", start, load_seconds, [&] { return AutotunePlan(traced.input, resources); }));
  row.contenders.push_back(Planned("pipetune", start, load_seconds, [&] {
    return tuner::Solve(traced.input, resources, tuner::Objective::kMax);
  }));

  fmt::print(stderr, "{}: grid search\n", c.name);
  Oracle oracle = GridSearch(c, start, flags.grid_seconds);
  row.oracle_seconds = oracle.seconds;
  row.oracle_runs = oracle.runs;
  row.contenders.push_back({"oracle", oracle.config, oracle.seconds, {}});

  // Contenders with the same knobs are the same pipeline: measured once per
  // round and given the same numbers, so that noise cannot split them.
  fmt::print(stderr, "{}: measuring the five side by side\n", c.name);
  for (int r = 0; r < flags.repeats; ++r) {
    std::map<std::string, double> measured;
    for (Contender& contender : row.contenders) {
      std::string knobs = Knobs(contender.config);
      if (!measured.count(knobs)) measured[knobs] = Measure(contender.config, flags.seconds);
      contender.measured.push_back(measured[knobs]);
    }
  }
  for (const Contender& contender : row.contenders) {
    fmt::print(stderr, "  {:<9} {:>9.1f}/s  {}\n", contender.name, contender.Median(),
               Knobs(contender.config));
  }
  return row;
}

std::string Table(const std::vector<Row>& rows) {
  std::string text =
      "| pipeline | start | Plumber | AUTOTUNE | pipetune | oracle (grid) | decide: Plumber / AUTOTUNE / "
      "pipetune | "
      "grid search |\n|---|---|---|---|---|---|---|---|\n";
  for (const Row& row : rows) {
    double oracle = row.contenders.back().Median();
    auto cell = [&](size_t i) {
      double x = row.contenders[i].Median();
      return fmt::format("{:.1f}/s ({:.2f})", x, oracle > 0 ? x / oracle : 0.0);
    };
    text += fmt::format(
        "| {} | {} | {} | {} | **{}** | {:.1f}/s | {:.0f} / {:.0f} / {:.0f} ms | {} runs, {:.0f} s |\n",
        row.name, cell(0), cell(1), cell(2), cell(3), oracle, row.contenders[1].decide_seconds * 1e3,
        row.contenders[2].decide_seconds * 1e3, row.contenders[3].decide_seconds * 1e3, row.oracle_runs,
        row.oracle_seconds);
  }
  text += "\n| pipeline | what | Plumber | AUTOTUNE | pipetune | oracle |\n|---|---|---|---|---|---|\n";
  for (const Row& row : rows) {
    text += fmt::format("| {} | {} | {} | {} | {} | {} |\n", row.name, row.what,
                        Knobs(row.contenders[1].config), Knobs(row.contenders[2].config),
                        Knobs(row.contenders[3].config), Knobs(row.contenders[4].config));
  }
  return text;
}

std::string RatioLine(const std::vector<Row>& rows) {
  double worst = 1e9;
  int beats_peers = 0;
  for (const Row& row : rows) {
    double ours = row.contenders[3].Median(), oracle = row.contenders[4].Median();
    worst = std::min(worst, oracle > 0 ? ours / oracle : 0);
    // Within 2% of the better peer counts as not below it: run-to-run noise.
    double peer = std::max(row.contenders[1].Median(), row.contenders[2].Median());
    if (ours >= 0.98 * peer) ++beats_peers;
  }
  return fmt::format("pipetune / oracle: min {:.2f} over {} pipelines; at or above both peers on {}/{}\n",
                     worst, rows.size(), beats_peers, rows.size());
}

}  // namespace
}  // namespace pipetune::bench

int main(int argc, char** argv) {
  using namespace pipetune;
  bench::Flags flags;
  CLI::App app{
      "pipetune tuner quality benchmark: start, Plumber, AUTOTUNE, pipetune and a grid-search oracle"};
  app.add_option("--seconds", flags.seconds, "Seconds per measured run of the final comparison");
  app.add_option("--grid-seconds", flags.grid_seconds, "Seconds per run of the oracle's grid search");
  app.add_option("--trace-seconds", flags.trace_seconds, "Seconds of the traced run the tuners decide from");
  app.add_option("--repeats", flags.repeats, "Round-robin repeats of the final comparison (median)");
  app.add_option("--only", flags.only, "Run only this pipeline of the suite");
  app.add_option("--markdown", flags.markdown, "Also write the table to this file");
  CLI11_PARSE(app, argc, argv);

  std::string dir =
      (std::filesystem::temp_directory_path() / fmt::format("pipetune-quality-{}", getpid())).string();
  std::filesystem::create_directories(dir);
  std::vector<bench::Row> rows;
  for (const bench::QualityCase& c : bench::QualitySuite()) {
    if (!flags.only.empty() && c.name != flags.only) continue;
    rows.push_back(bench::RunCase(c, flags, dir));
  }
  std::filesystem::remove_all(dir);
  if (rows.empty()) {
    fmt::print(stderr, "tuner_quality: no pipeline called \"{}\"\n", flags.only);
    return 2;
  }
  std::string table = bench::Table(rows);
  std::string ratio = bench::RatioLine(rows);
  fmt::print("{}\n{}", table, ratio);
  if (!flags.markdown.empty()) {
    Status written = WriteFileAtomically(flags.markdown, table + "\n" + ratio);
    if (!written.ok()) fmt::print(stderr, "tuner_quality: {}\n", written.message());
  }
  return 0;
}

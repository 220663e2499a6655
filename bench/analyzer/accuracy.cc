// analyzer_accuracy: does the model predict the runs it watches, and does it
// name the bottleneck the costs imply? For each example pipeline at several
// configurations: run it traced, diagnose the trace, and print
//
//   expected limit (from the configured costs) | named limit | predicted |
//   measured | predicted / measured | the same, predicted from the first
//   configuration's trace (a what-if) instead of its own
//
// The synthetic pipelines' costs are known (cpu_work us, io_wait ms), so the
// limit they imply is computed from the config alone; ties within 5% accept
// either name. The image pipeline's expected limit is decode (about 80% of its
// CPU per image). Range sources are made endless so that timed runs never
// run dry. The last line is the summary ratio.
//
//   analyzer_accuracy [--seconds 6] [--only NAME] [--keep-traces DIR]
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <set>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "pipetune/analyzer/diagnosis.h"
#include "traced_run.h"

namespace {

using namespace pipetune;

struct Case {
  std::string config;                // under examples/
  std::vector<std::string> knobs;    // "decode.parallelism=2"
  std::optional<std::string> cache_after;  // insert a memory cache after this stage
  std::string expected;              // "" = from the costs
};

struct Group {
  std::vector<Case> cases;  // the first is the base the others are predicted from
};

std::vector<Group> Suite() {
  return {
      {{{"synthetic/two_stage_cpu.json", {}, {}, ""},
        {"synthetic/two_stage_cpu.json", {"decode.parallelism=2"}, {}, ""},
        {"synthetic/two_stage_cpu.json", {"decode.parallelism=2", "augment.parallelism=2"}, {}, ""}}},
      {{{"synthetic/per_batch.json", {}, {}, ""},
        {"synthetic/per_batch.json", {"decode.parallelism=2"}, {}, ""},
        {"synthetic/per_batch.json", {"decode.parallelism=2", "collate.parallelism=2"}, {}, ""}}},
      {{{"synthetic/remote_storage.json", {}, {}, ""},
        {"synthetic/remote_storage.json", {"fetch.parallelism=4"}, {}, ""},
        {"synthetic/remote_storage.json", {"fetch.parallelism=32"}, {}, ""}}},
      {{{"synthetic/slow_consumer.json", {}, {}, ""},
        {"synthetic/slow_consumer.json", {"decode.parallelism=2"}, {}, ""}}},
      {{{"synthetic/starved_consumer.json", {}, {}, ""},
        {"synthetic/starved_consumer.json", {"fetch_labels.parallelism=4"}, {}, ""}}},
      {{{"synthetic/cache_fits.json", {}, {}, ""},
        {"synthetic/cache_fits.json", {}, std::string("decode"), ""}}},
      {{{"image/image_train.json", {}, {}, "decode"},
        {"image/image_train.json", {"decode.parallelism=2"}, {}, ""}}},
  };
}

// Per-element CPU and wall seconds of a stage, from its configured function.
std::pair<double, double> KnownCost(const models::StageConfig& stage) {
  if (stage.fn == "cpu_work" && stage.args.contains("us")) {
    double s = stage.args["us"].get<double>() / 1e6;
    return {s, s};
  }
  if (stage.fn == "io_wait" && stage.args.contains("ms")) return {0.0, stage.args["ms"].get<double>() / 1e3};
  return {0.0, 0.0};
}

// The limits within 5% of the tightest bound the configured costs imply:
// stage names (their workers are all busy), "cpu" or "demand".
std::set<std::string> ExpectedLimits(const models::PipelineConfig& config, double cores,
                                     std::optional<size_t> cache_after) {
  std::vector<double> visit(config.stages.size(), 1.0);
  double v = 1;
  for (size_t i = config.stages.size(); i-- > 0;) {
    visit[i] = v;
    const models::StageConfig& stage = config.stages[i];
    if (stage.op == models::Op::kBatch) v *= stage.args["size"].get<double>();
  }
  std::vector<std::pair<double, std::string>> bounds;
  double cpu_per_output = 0;
  for (size_t i = 0; i < config.stages.size(); ++i) {
    if (cache_after && i <= *cache_after) continue;
    auto [cpu, wall] = KnownCost(config.stages[i]);
    cpu_per_output += cpu * visit[i];
    if (wall > 0) bounds.emplace_back(config.stages[i].parallelism / (wall * visit[i]), config.stages[i].name);
  }
  if (cpu_per_output > 0) bounds.emplace_back(cores / cpu_per_output, "cpu");
  if (config.consumer.step_time_ms) bounds.emplace_back(1e3 / *config.consumer.step_time_ms, "demand");
  double tightest = std::min_element(bounds.begin(), bounds.end())->first;
  std::set<std::string> limits;
  for (const auto& [x, name] : bounds) {
    if (x <= tightest * 1.05) limits.insert(name);
  }
  return limits;
}

std::string Named(const analyzer::Diagnosis& d) {
  if (d.bound == "concurrency" && d.bottleneck) return *d.bottleneck;
  return d.bound;
}

void InsertCache(models::PipelineConfig& config, const std::string& after) {
  size_t index = *config.FindStage(after) + 1;
  models::StageConfig cache;
  cache.name = "cache";
  cache.op = models::Op::kCache;
  cache.location = "memory";
  cache.raw = models::Json{{"name", "cache"}, {"op", "cache"}, {"location", "memory"}};
  config.stages.insert(config.stages.begin() + static_cast<long>(index), cache);
  for (size_t i = 0; i < config.stages.size(); ++i) config.stages[i].index = i;
}

std::string What(const Case& c) {
  std::vector<std::string> parts = c.knobs;
  if (c.cache_after) parts.push_back("cache=" + *c.cache_after);
  return parts.empty() ? "as written" : fmt::format("{}", fmt::join(parts, ","));
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Model accuracy on the example pipelines"};
  double seconds = 6;
  std::string only, keep;
  app.add_option("--seconds", seconds, "seconds per run");
  app.add_option("--only", only, "only pipelines whose config path contains this");
  app.add_option("--keep-traces", keep, "write the traces into this directory");
  CLI11_PARSE(app, argc, argv);
  std::string examples = std::string(PIPETUNE_SOURCE_DIR) + "/examples/";
  std::string dir = keep.empty() ? (std::filesystem::temp_directory_path() / "pipetune_accuracy").string() : keep;
  std::filesystem::create_directories(dir);

  fmt::print("{:<18} {:<34} {:<22} {:<14} {:>5} {:>9} {:>9} {:>6} {:>9} {:>6}\n", "pipeline", "configuration",
             "expected limit", "named", "ok", "predicted", "measured", "ratio", "from base", "ratio");
  double worst = 1, best = 1;
  int runs = 0, named_right = 0, within = 0;
  int cross = 0, cross_within = 0;
  int counter = 0;
  for (const Group& group : Suite()) {
    if (!only.empty() && group.cases[0].config.find(only) == std::string::npos) continue;
    std::optional<models::Profile> base;
    for (const Case& c : group.cases) {
      StatusOr<models::PipelineConfig> config = models::LoadConfig(examples + c.config);
      if (!config.ok()) {
        fmt::print(stderr, "error: {}\n", config.status().message());
        return 2;
      }
      for (const std::string& knob : c.knobs) {
        Status set = bench::SetKnob(*config, knob);
        if (!set.ok()) {
          fmt::print(stderr, "error: {}\n", set.message());
          return 2;
        }
      }
      std::optional<size_t> cache_after;
      if (c.cache_after) {
        cache_after = *config->FindStage(*c.cache_after);
        InsertCache(*config, *c.cache_after);
      }
      bench::MakeEndless(*config);
      bench::TracedRunOptions options;
      options.seconds = seconds;
      options.trace_path = fmt::format("{}/{:02d}_{}.trace", dir, counter++, config->name);
      options.base_dir = std::filesystem::path(examples + c.config).parent_path().string();
      StatusOr<runtime::RunSummary> summary = bench::RunTraced(*config, options);
      if (!summary.ok()) {
        fmt::print(stderr, "error: {}: {}\n", c.config, summary.status().message());
        return 2;
      }
      StatusOr<analyzer::Diagnosis> d = analyzer::DiagnoseTraces({options.trace_path});
      if (!d.ok()) {
        fmt::print(stderr, "error: {}\n", d.status().message());
        return 2;
      }
      std::set<std::string> expected =
          c.expected.empty() ? ExpectedLimits(*config, d->cores, cache_after) : std::set<std::string>{c.expected};
      std::string named = Named(*d);
      bool ok = expected.count(named) > 0;
      std::string cross_text = "-", cross_ratio = "-";
      if (!base) {
        base = d->profile;
      } else {
        std::string question = fmt::format("{}", fmt::join(c.knobs, ","));
        if (c.cache_after) question += (question.empty() ? "" : ",") + ("cache=" + *c.cache_after);
        StatusOr<analyzer::WhatIf> what_if = analyzer::ParseWhatIf(question);
        StatusOr<analyzer::WhatIfOutcome> outcome =
            what_if.ok() ? analyzer::EvaluateWhatIf(*base, *what_if) : StatusOr<analyzer::WhatIfOutcome>(what_if.status());
        if (outcome.ok() && outcome->allowed && d->measured_throughput > 0) {
          double ratio = outcome->throughput / d->measured_throughput;
          cross_text = fmt::format("{:.1f}", outcome->throughput);
          cross_ratio = fmt::format("{:.2f}", ratio);
          ++cross;
          if (ratio >= 0.9 && ratio <= 1.1) ++cross_within;
        }
      }
      std::string named_text = named == "cpu" && d->bottleneck ? "cpu (" + *d->bottleneck + ")" : named;
      fmt::print("{:<18} {:<34} {:<22} {:<14} {:>5} {:>9.1f} {:>9.1f} {:>6.2f} {:>9} {:>6}\n", config->name, What(c),
                 fmt::format("{}", fmt::join(expected, "|")), named_text, ok ? "yes" : "NO", d->predicted_throughput,
                 d->measured_throughput, d->prediction_ratio, cross_text, cross_ratio);
      std::fflush(stdout);
      ++runs;
      named_right += ok ? 1 : 0;
      within += d->prediction_ratio >= 0.9 && d->prediction_ratio <= 1.1 ? 1 : 0;
      worst = std::max(worst, d->prediction_ratio);
      best = std::min(best, d->prediction_ratio);
      if (keep.empty()) std::filesystem::remove(options.trace_path);
    }
  }
  fmt::print("\nbottleneck named as the costs imply: {} of {}\n", named_right, runs);
  fmt::print("predicted from a config's own trace within 0.9-1.1: {} of {}; from the base config's trace: {} of {}\n",
             within, runs, cross_within, cross);
  fmt::print("predicted / measured, own trace: min {:.2f}, max {:.2f}\n", best, worst);
  return 0;
}

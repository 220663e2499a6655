// analyzer_accuracy: does the model predict the runs it watches, and does it
// blame the stage the costs imply? For each example pipeline at several
// configurations: run it traced, diagnose the trace, and print
//
//   free cores (probed just before the run) | the stage the configured costs
//   blame | the stage the analyzer blames (and its bound) | predicted |
//   measured | predicted / measured | the same, predicted from the first
//   configuration's trace (a what-if) instead of its own
//
// The synthetic pipelines' costs are known (cpu_work us, io_wait ms), so the
// stage they blame follows from the config and the free cores alone: the
// stage whose workers are all busy, or the heaviest CPU stage when the cores
// bind, or "demand"; ties within 5% accept either. The image pipeline's is
// decode (about 80% of its CPU per image). Range sources are made endless so
// that timed runs never run dry. The last lines are the summary ratios.
//
//   analyzer_accuracy [--seconds 6] [--only NAME] [--keep-traces DIR] [--cores N]
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <set>
#include <thread>

#include "pipetune/analyzer/diagnosis.h"
#include "pipetune/base/clock.h"
#include "pipetune/workflow/run.h"
#include "traced_run.h"

namespace {

using namespace pipetune;

struct Case {
  std::string config;                      // under examples/
  std::vector<std::string> knobs;          // "decode.parallelism=2"
  std::optional<std::string> cache_after;  // insert a memory cache after this stage
  std::string expected;                    // "" = from the costs
  bool endless_repeat = false;             // drop a repeat's count (so a cache replays for the whole run)
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
      {{{"synthetic/cache_fits.json", {}, {}, "", true},
        {"synthetic/cache_fits.json", {}, std::string("decode"), "", true}}},
      {{{"image/image_train.json", {}, {}, "decode"},
        {"image/image_train.json", {"decode.parallelism=2"}, {}, "decode"}}},
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

// The stages to blame, within 5% of the tightest bound the configured costs
// imply on `cores` free cores: a stage whose workers are all busy, the
// heaviest CPU stage when the cores bind, "demand" when the consumer does.
std::set<std::string> ExpectedBlame(const models::PipelineConfig& config, double cores,
                                    std::optional<size_t> cache_after) {
  std::vector<double> visit(config.stages.size(), 1.0);
  double v = 1;
  for (size_t i = config.stages.size(); i-- > 0;) {
    visit[i] = v;
    const models::StageConfig& stage = config.stages[i];
    if (stage.op == models::Op::kBatch) v *= stage.args["size"].get<double>();
  }
  std::vector<std::pair<double, std::string>> bounds;
  double cpu_per_output = 0, heaviest_cpu = 0;
  std::vector<std::pair<double, std::string>> cpu_by_stage;
  for (size_t i = 0; i < config.stages.size(); ++i) {
    if (cache_after && i <= *cache_after) continue;
    auto [cpu, wall] = KnownCost(config.stages[i]);
    cpu_per_output += cpu * visit[i];
    heaviest_cpu = std::max(heaviest_cpu, cpu * visit[i]);
    cpu_by_stage.emplace_back(cpu * visit[i], config.stages[i].name);
    if (wall > 0)
      bounds.emplace_back(config.stages[i].parallelism / (wall * visit[i]), config.stages[i].name);
  }
  if (cpu_per_output > 0) bounds.emplace_back(cores / cpu_per_output, "cpu");
  if (config.consumer.step_time_ms) bounds.emplace_back(1e3 / *config.consumer.step_time_ms, "demand");
  double tightest = std::min_element(bounds.begin(), bounds.end())->first;
  std::set<std::string> blame;
  for (const auto& [x, name] : bounds) {
    if (x > tightest * 1.05) continue;
    if (name != "cpu") {
      blame.insert(name);
      continue;
    }
    for (const auto& [cpu, stage] : cpu_by_stage) {
      if (cpu >= heaviest_cpu * 0.95) blame.insert(stage);
    }
  }
  return blame;
}

std::string Blamed(const analyzer::Diagnosis& d) {
  if (d.bottleneck) return *d.bottleneck;
  return models::BoundKindName(d.bound);
}

// Cores this process can use right now: busy-loop one thread per core for
// a moment and count the CPU time they got. On a shared host it is less
// than the core count; the expected blame is computed for it.
double FreeCores(int cores) {
  std::vector<std::thread> threads;
  std::vector<double> cpu(static_cast<size_t>(cores), 0.0);
  auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < cores; ++i) {
    threads.emplace_back([&, i] {
      volatile uint64_t sink = 0;
      while (std::chrono::steady_clock::now() - start < std::chrono::milliseconds(400)) sink = sink + 1;
      cpu[static_cast<size_t>(i)] = ThreadCpuSeconds();
    });
  }
  for (std::thread& t : threads) t.join();
  double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  double total = 0;
  for (double c : cpu) total += c;
  return total / wall;
}

// The base trace's profile as if its host had had only the cores that were
// free during its run (a CPU quota in its host facts): on a shared host,
// what-ifs are only meaningful against the cores actually available.
StatusOr<analyzer::ProfiledRun> TellFreeCores(const analyzer::CollectedTrace& trace, double free_cores) {
  analyzer::CollectedTrace told = trace;
  told.header.host.cpu_period_us = 100000;
  told.header.host.cpu_quota_us = std::max<int64_t>(1000, std::llround(free_cores * 100000));
  return analyzer::ProfileCollected(told);
}

// "decode.parallelism=2,cache=decode": the what-if that turns the base
// configuration into this case's.
std::string Question(const Case& c) {
  std::vector<std::string> parts = c.knobs;
  if (c.cache_after) parts.push_back("cache=" + *c.cache_after);
  return fmt::format("{}", fmt::join(parts, ","));
}

std::optional<double> Ask(const models::Profile& profile, const std::string& question) {
  StatusOr<analyzer::WhatIf> what_if = analyzer::ParseWhatIf(question);
  if (!what_if.ok()) return std::nullopt;
  StatusOr<analyzer::WhatIfOutcome> outcome = analyzer::EvaluateWhatIf(profile, *what_if);
  if (!outcome.ok() || !outcome->allowed) return std::nullopt;
  return outcome->throughput;
}

void InsertCache(models::PipelineConfig& config, const std::string& after) {
  size_t index = *config.FindStage(after) + 1;
  models::StageConfig cache;
  cache.name = "cache";
  cache.op = models::Op::kCache;
  cache.location = models::CacheLocation::Memory();
  cache.raw = Json{{"name", "cache"}, {"op", "cache"}, {"location", "memory"}};
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
  double cores_flag = 0;
  app.add_option("--cores", cores_flag, "cores to probe for (default: all online)");
  CLI11_PARSE(app, argc, argv);
  std::string examples = std::string(PIPETUNE_SOURCE_DIR) + "/examples/";
  std::string dir =
      keep.empty() ? (std::filesystem::temp_directory_path() / "pipetune_accuracy").string() : keep;
  std::filesystem::create_directories(dir);

  double runtime_cores = static_cast<double>(std::thread::hardware_concurrency());
  if (cores_flag > 0) runtime_cores = cores_flag;
  fmt::print("{:<16} {:<44} {:>5} {:<20} {:<26} {:>3} {:>9} {:>9} {:>6} {:>9} {:>6} {:>9} {:>6}\n",
             "pipeline", "configuration", "free", "costs blame", "analyzer blames (bound)", "ok", "predicted",
             "measured", "ratio", "from base", "ratio", "base+free", "ratio");
  double worst = 1, best = 1;
  int runs = 0, named_right = 0, within = 0;
  int cross = 0, cross_within = 0, told_runs = 0, told_within = 0;
  int counter = 0;
  for (const Group& group : Suite()) {
    if (!only.empty() && group.cases[0].config.find(only) == std::string::npos) continue;
    std::optional<models::Profile> base;
    std::optional<analyzer::CollectedTrace> base_trace;
    double base_free_cores = 0;
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
      if (c.endless_repeat) {
        for (models::StageConfig& stage : config->stages) {
          if (stage.op != models::Op::kRepeat) continue;
          stage.args.erase("count");
          if (stage.raw.contains("args")) stage.raw["args"].erase("count");
        }
      }
      double free_cores = FreeCores(static_cast<int>(std::max(1.0, std::round(runtime_cores))));
      workflow::RunConfigOptions options;
      options.seconds = seconds;
      options.spans_per_stage_per_second = bench::kBenchSpansPerStagePerSecond;
      options.trace_path = fmt::format("{}/{:02d}_{}.trace", dir, counter++, config->name);
      options.base_dir = std::filesystem::path(examples + c.config).parent_path().string();
      StatusOr<runtime::RunSummary> summary = workflow::RunConfig(*config, options);
      if (!summary.ok()) {
        fmt::print(stderr, "error: {}: {}\n", c.config, summary.status().message());
        return 2;
      }
      StatusOr<analyzer::CollectedTrace> collected = analyzer::CollectTrace(options.trace_path);
      if (!collected.ok()) {
        fmt::print(stderr, "error: {}\n", collected.status().message());
        return 2;
      }
      StatusOr<analyzer::Diagnosis> d = analyzer::Diagnose(*collected, options.trace_path);
      if (!d.ok()) {
        fmt::print(stderr, "error: {}\n", d.status().message());
        return 2;
      }
      std::set<std::string> expected =
          c.expected.empty() ? ExpectedBlame(*config, std::min(d->cores, free_cores), cache_after)
                             : std::set<std::string>{c.expected};
      std::string named = Blamed(*d);
      bool ok = expected.count(named) > 0;
      std::string cross_text = "-", cross_ratio = "-", told_text = "-", told_ratio = "-";
      auto record = [&](std::optional<double> predicted, std::string& text, std::string& ratio_text,
                        int& count, int& count_within) {
        if (!predicted || d->measured_throughput <= 0) return;
        double ratio = *predicted / d->measured_throughput;
        text = fmt::format("{:.1f}", *predicted);
        ratio_text = fmt::format("{:.2f}", ratio);
        ++count;
        if (ratio >= 0.9 && ratio <= 1.1) ++count_within;
      };
      if (!base_trace) {
        base = d->profile;
        base_trace = std::move(*collected);
        base_free_cores = free_cores;
      } else {
        std::string change = Question(c);
        record(Ask(*base, change), cross_text, cross_ratio, cross, cross_within);
        StatusOr<analyzer::ProfiledRun> told = TellFreeCores(*base_trace, base_free_cores);
        if (told.ok()) {
          std::string cores = fmt::format("cores={:.3f}", free_cores);
          record(Ask(told->profile, change.empty() ? cores : change + "," + cores), told_text, told_ratio,
                 told_runs, told_within);
        }
      }
      std::string named_text = fmt::format("{} ({})", named, models::BoundKindName(d->bound));
      fmt::print(
          "{:<16} {:<44} {:>5.2f} {:<20} {:<26} {:>3} {:>9.1f} {:>9.1f} {:>6.2f} {:>9} {:>6} {:>9} {:>6}\n",
          config->name, What(c), free_cores, fmt::format("{}", fmt::join(expected, "|")), named_text,
          ok ? "yes" : "NO", d->predicted_throughput, d->measured_throughput, d->prediction_ratio, cross_text,
          cross_ratio, told_text, told_ratio);
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
  fmt::print(
      "predicted from a config's own trace within 0.9-1.1: {} of {}; from the base config's trace: {} of "
      "{}\n",
      within, runs, cross_within, cross);
  fmt::print("predicted from the base config's trace told the free cores, within 0.9-1.1: {} of {}\n",
             told_within, told_runs);
  fmt::print("predicted / measured, own trace: min {:.2f}, max {:.2f}\n", best, worst);
  return 0;
}

#include "pipetune/tuner/dataloader_tuner.h"

#include <fmt/format.h>

#include <cmath>

namespace pipetune::tuner {

using analyzer::DataLoaderKnobs;
using analyzer::DataLoaderPrediction;

const char* DataLoaderBindingName(DataLoaderBinding binding) {
  switch (binding) {
    case DataLoaderBinding::kModel:
      return "the pipeline itself";
    case DataLoaderBinding::kMemory:
      return "memory";
    case DataLoaderBinding::kCores:
      return "cores";
  }
  return "?";
}

DataLoaderPlan TuneDataLoader(const analyzer::DataLoaderProfile& profile, const DataLoaderBudgets& budgets) {
  DataLoaderPlan plan;
  plan.budgets = budgets;
  plan.batch_size = profile.settings.batch_size;
  plan.current = analyzer::CurrentKnobs(profile.settings);
  plan.current_prediction = analyzer::PredictDataLoader(profile, plan.current, budgets.cores);
  const double memory = budgets.memory_bytes > 0 ? static_cast<double>(budgets.memory_bytes) : INFINITY;

  bool found = false;
  DataLoaderKnobs best;
  DataLoaderPrediction best_prediction;
  DataLoaderKnobs best_unbounded;  // the best ignoring memory, to say whether memory binds
  DataLoaderPrediction best_unbounded_prediction;
  bool found_unbounded = false;
  auto better = [](const DataLoaderPrediction& a, const DataLoaderPrediction& b) {
    return a.batches_per_second > b.batches_per_second * 1.01;
  };
  std::vector<bool> pins{false};
  if (profile.cuda_available) pins.push_back(true);
  for (int n = 0; n <= budgets.max_workers; ++n) {
    for (int prefetch : {2, 4, 1}) {
      if (n == 0 && prefetch != 2) continue;
      for (bool persistent : {plan.current.persistent_workers, !plan.current.persistent_workers}) {
        if (n == 0 && persistent) continue;
        for (bool pin : pins) {
          DataLoaderKnobs k{n, prefetch, persistent, pin};
          DataLoaderPrediction p = analyzer::PredictDataLoader(profile, k, budgets.cores);
          if (!found_unbounded || better(p, best_unbounded_prediction)) {
            best_unbounded = k;
            best_unbounded_prediction = p;
            found_unbounded = true;
          }
          if (p.memory_bytes > memory) continue;
          if (!found || better(p, best_prediction)) {
            best = k;
            best_prediction = p;
            found = true;
          }
        }
      }
    }
  }
  if (!found) {
    best = DataLoaderKnobs{0, 2, false, false};
    best_prediction = analyzer::PredictDataLoader(profile, best, budgets.cores);
    plan.notes.push_back(fmt::format("even num_workers=0 needs {:.0f} MiB, over the {:.0f} MiB memory budget",
                                     best_prediction.memory_bytes / 1048576.0, memory / 1048576.0));
  }
  plan.knobs = best;
  plan.predicted = best_prediction;
  if (found_unbounded && better(best_unbounded_prediction, best_prediction)) {
    plan.binding = DataLoaderBinding::kMemory;
    plan.notes.push_back(fmt::format(
        "memory binds: num_workers={} would deliver {:.1f} batches/s but needs {:.0f} MiB (budget {:.0f} "
        "MiB; "
        "each worker about {:.0f} MiB, each batch in flight {:.1f} MiB)",
        best_unbounded.num_workers, best_unbounded_prediction.batches_per_second,
        best_unbounded_prediction.memory_bytes / 1048576.0, memory / 1048576.0,
        (profile.worker_rss_bytes > 0 ? profile.worker_rss_bytes : profile.main_rss_bytes) / 1048576.0,
        profile.batch_bytes / 1048576.0));
  } else if (best_prediction.bound == analyzer::DataLoaderBound::kCores) {
    plan.binding = DataLoaderBinding::kCores;
    plan.notes.push_back(fmt::format("cores bind: {:.1f} cores are all busy at num_workers={}", budgets.cores,
                                     best.num_workers));
  }
  if (profile.loading_cpu_share < 0.75) {
    plan.notes.push_back(fmt::format(
        "while loading samples the traced process got {:.2f} CPU-s per second: the host was shared, so fewer "
        "than {:.1f} cores may be free; give --cores the share actually available{}",
        profile.loading_cpu_share, budgets.cores,
        profile.shared_host
            ? " (samples came from the page cache, so the model counts the workers' wall time as CPU)"
            : ""));
  }
  if (profile.settings.pin_memory && !best.pin_memory && !profile.cuda_available) {
    plan.notes.push_back("pin_memory off: no CUDA device, pinning only costs time");
  }
  if (best.num_workers > 0 && profile.epochs.size() <= 1 && !best.persistent_workers) {
    plan.notes.push_back(
        "one epoch traced: persistent_workers=True saves the workers' start-up "
        "in every later epoch, which the trace cannot show");
  }
  return plan;
}

nlohmann::json DataLoaderKwargs(const DataLoaderKnobs& k) {
  nlohmann::json j;
  j["num_workers"] = k.num_workers;
  j["prefetch_factor"] = k.num_workers > 0 ? nlohmann::json(k.prefetch_factor) : nlohmann::json();
  j["persistent_workers"] = k.num_workers > 0 && k.persistent_workers;
  j["pin_memory"] = k.pin_memory;
  return j;
}

std::string DataLoaderCodeChange(const DataLoaderKnobs& k) {
  if (k.num_workers == 0) {
    return fmt::format("DataLoader(dataset, ..., num_workers=0, pin_memory={})",
                       k.pin_memory ? "True" : "False");
  }
  return fmt::format(
      "DataLoader(dataset, ..., num_workers={}, prefetch_factor={}, persistent_workers={}, "
      "pin_memory={})",
      k.num_workers, k.prefetch_factor, k.persistent_workers ? "True" : "False",
      k.pin_memory ? "True" : "False");
}

std::string FormatDataLoaderPlanText(const DataLoaderPlan& plan) {
  auto line = [&](const char* what, const DataLoaderKnobs& k, const DataLoaderPrediction& p) {
    return fmt::format(
        "{:<8} num_workers={} prefetch_factor={} persistent_workers={} pin_memory={}: "
        "{:.2f} batches/s ({:.1f} samples/s), {:.0f} MiB, limited by {}\n",
        what, k.num_workers, k.num_workers > 0 ? std::to_string(k.prefetch_factor) : "-",
        k.persistent_workers ? "True" : "False", k.pin_memory ? "True" : "False", p.batches_per_second,
        p.batches_per_second * plan.batch_size, p.memory_bytes / 1048576.0, p.limiting_stage);
  };
  std::string out = fmt::format("DataLoader plan ({:.1f} cores, {} memory)\n", plan.budgets.cores,
                                plan.budgets.memory_bytes > 0
                                    ? fmt::format("{:.0f} MiB", plan.budgets.memory_bytes / 1048576.0)
                                    : std::string("unbounded"));
  out += line("current", plan.current, plan.current_prediction);
  out += line("tuned", plan.knobs, plan.predicted);
  double speedup = plan.current_prediction.batches_per_second > 0
                       ? plan.predicted.batches_per_second / plan.current_prediction.batches_per_second
                       : 0.0;
  out +=
      fmt::format("predicted speed-up: {:.2f}x; binds: {}\n", speedup, DataLoaderBindingName(plan.binding));
  for (const std::string& n : plan.notes) out += "note: " + n + "\n";
  return out;
}

nlohmann::json DataLoaderPlanToJson(const DataLoaderPlan& plan) {
  auto prediction = [](const DataLoaderPrediction& p) {
    return nlohmann::json{{"batches_per_second", p.batches_per_second},
                          {"limiting_stage", p.limiting_stage},
                          {"limiting_kind", analyzer::DataLoaderStageKindName(p.limiting_kind)},
                          {"bound", analyzer::DataLoaderBoundName(p.bound)},
                          {"memory_bytes", p.memory_bytes},
                          {"startup_seconds", p.startup_seconds}};
  };
  return {{"current", DataLoaderKwargs(plan.current)},
          {"tuned", DataLoaderKwargs(plan.knobs)},
          {"current_prediction", prediction(plan.current_prediction)},
          {"predicted", prediction(plan.predicted)},
          {"binds", DataLoaderBindingName(plan.binding)},
          {"budgets", {{"cores", plan.budgets.cores}, {"memory_bytes", plan.budgets.memory_bytes}}},
          {"code_change", DataLoaderCodeChange(plan.knobs)},
          {"notes", plan.notes}};
}

}  // namespace pipetune::tuner

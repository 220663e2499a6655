// Shared cells of the human-readable reports (report_rows.h).
#include "report_rows.h"

#include <fmt/format.h>

#include <cmath>

#include "format_util.h"
#include "pipetune/analyzer/dataloader.h"
#include "pipetune/analyzer/dataloader_job.h"
#include "pipetune/base/size.h"
#include "pipetune/models/config.h"

namespace pipetune::analyzer::internal {

Table StageTable(const Diagnosis& d) {
  Table table;
  table.header = {"stage",     "op",   "workers", "cores",    "out/s per core",
                  "max out/s", "busy", "wait in", "wait out", "limited by"};
  table.right_aligned = {false, false, true, true, true, true, true, true, true, false};
  for (const StageDiagnosis& s : d.stages) {
    std::string op = s.fn.empty() ? s.op : fmt::format("{}({})", s.op, s.fn);
    table.rows.push_back({
        s.name,
        op,
        std::to_string(s.parallelism),
        Cores(s.cores_used),
        s.rate_per_core > 0 ? Rate(s.rate_per_core) : "-",
        std::isfinite(s.max_throughput) ? Rate(s.max_throughput) : "-",
        Percent(s.busy_fraction),
        Percent(s.wait_input_fraction),
        Percent(s.wait_output_fraction),
        StageLimitName(s.limited_by),
    });
    table.highlighted.push_back(s.bottleneck);
  }
  return table;
}

namespace {

std::string RankCell(const std::optional<int>& rank) { return rank ? std::to_string(*rank) : "-"; }

// How a process ended, in a few words: "ok", "exit 1", "ValueError",
// "killed at 3.2 s" (its last snapshot on the job's timeline).
std::string EndedCell(const RankRow& r) {
  if (r.ended == "killed") return fmt::format("killed at {:.1f} s", r.end_seconds);
  if (r.ended == "failed") {
    std::string kind = r.exception.substr(0, r.exception.find(':'));
    if (!kind.empty()) return kind;
    return fmt::format("exit {}", r.exit_status.value_or(1));
  }
  return "ok";
}

std::string LimitCell(const RankRow& r) {
  if (!r.error.empty()) return r.error;
  if (r.bottleneck) return *r.bottleneck;
  return r.bound;
}

}  // namespace

namespace {

// How long a run must be before the DataLoader's prediction is its steady
// rate; empty when nothing is paid per epoch.
std::string RunLengthText(const DataLoaderSection& dl) {
  if (dl.steady_from_batches <= 0 || dl.epoch_batches <= 0) return "";
  std::string of_loader;
  if (dl.settings.batches_per_epoch &&
      static_cast<double>(*dl.settings.batches_per_epoch) > dl.epoch_batches + 0.5)
    of_loader = fmt::format(" (of the loader's {})", *dl.settings.batches_per_epoch);
  return fmt::format(
      "predicted for epochs of {:.0f} batches as this run took them{}, start-up, fill and drain included; "
      "the steady {} batches/s holds within 5% from epochs of {:.0f} batches",
      dl.epoch_batches, of_loader, Rate(dl.steady_throughput), dl.steady_from_batches);
}

}  // namespace

Table RankTable(const Diagnosis& d) {
  Table table;
  if (!d.job) return table;
  table.header = {"rank",    "local", "host",    "pid",   "batches/s", "input/s", "data wait",
                  "step ms", "limit", "workers", "cores", "peak RSS",  "ended"};
  table.right_aligned = {true, true, false, true, true, true, true, true, false, true, true, true, false};
  for (size_t i = 0; i < d.job->ranks.size(); ++i) {
    const RankRow& r = d.job->ranks[i];
    bool diagnosed = r.error.empty();
    table.rows.push_back({
        RankCell(r.rank),
        RankCell(r.local_rank),
        r.host,
        std::to_string(r.pid),
        diagnosed ? Rate(r.throughput) : "-",
        diagnosed ? Rate(r.input_throughput) : "-",
        diagnosed ? Percent(r.stall_fraction) : "-",
        diagnosed ? Millis(r.step_ms) : "-",
        LimitCell(r),
        std::to_string(r.workers),
        diagnosed && r.cores_used >= 0 ? Cores(r.cores_used) : "-",
        diagnosed ? FormatBytes(static_cast<double>(r.peak_rss_bytes)) : "-",
        EndedCell(r),
    });
    table.highlighted.push_back(d.job->straggler_row == i);
  }
  return table;
}

std::string StragglerLine(const Diagnosis& d) {
  if (!d.job) return "";
  const JobSection& job = *d.job;
  std::string ranks = fmt::format("{} process{} on {} host{}", job.ranks.size(),
                                  job.ranks.size() == 1 ? "" : "es", job.hosts, job.hosts == 1 ? "" : "s");
  if (job.missing > 0 && job.world_size)
    ranks += fmt::format(", {} of {} ranks missing", job.missing, *job.world_size);
  if (!job.straggler_row && job.ranks.size() < 2) return fmt::format("{}; no straggler: one rank", ranks);
  if (!job.straggler_row) return fmt::format("{}; no straggler: every rank's input keeps up", ranks);
  const RankRow& r = job.ranks[*job.straggler_row];
  return fmt::format("{}; > marks the straggler, {}", ranks,
                     r.rank ? fmt::format("rank {}", *r.rank) : fmt::format("pid {}", r.pid));
}

std::string DropsText(const Diagnosis& d) {
  std::vector<std::string> parts;
  auto add = [&](uint64_t n, const char* what) {
    if (n > 0) parts.push_back(fmt::format("{} {}", n, what));
  };
  add(std::max(d.drops.spans, d.spans_dropped), "spans");
  add(d.drops.consumer_steps, "consumer steps");
  add(d.drops.gpu_records, "GPU records");
  add(d.drops.gpu_records_at_source, "GPU records at the source");
  if (parts.empty()) return "none";
  return fmt::format("{} (counted in every total; only not recorded one by one)", fmt::join(parts, ", "));
}

std::string SettingsText(const DataLoaderSettings& s) {
  auto flag = [](bool b) { return b ? "True" : "False"; };
  std::string text = fmt::format("{}batch_size={} num_workers={}", s.iterable ? "IterableDataset, " : "",
                                 s.batch_size, s.num_workers);
  if (s.num_workers > 0) text += fmt::format(" prefetch_factor={}", s.prefetch_factor);
  if (s.fetch_threads > 1) text += fmt::format(" fetch_threads={}", s.fetch_threads);
  text += fmt::format(" persistent_workers={} pin_memory={}", flag(s.persistent_workers), flag(s.pin_memory));
  if (!s.sampler.empty()) text += " sampler=" + s.sampler;
  if (!s.dataset.empty()) text += " dataset=" + s.dataset;
  if (!s.start_method.empty()) text += " start_method=" + s.start_method;
  if (s.shards) text += fmt::format(" shards={}", *s.shards);
  return text;
}

std::vector<std::pair<std::string, std::string>> Headline(const Diagnosis& d) {
  std::vector<std::pair<std::string, std::string>> lines;
  // A trace of GPU activity alone has no pipeline to rate.
  if (!d.stages.empty() || !d.gpu) {
    std::string bound = models::BoundKindName(d.bound);
    if (d.bottleneck) bound += fmt::format(", stage {}", *d.bottleneck);
    lines.emplace_back("throughput", fmt::format("{} outputs/s measured, {} predicted ({:.2f}x); bound: {}",
                                                 Rate(d.measured_throughput), Rate(d.predicted_throughput),
                                                 d.prediction_ratio, bound));
    std::string consumer = fmt::format("waits for input {} of the time", Percent(d.stall_fraction));
    if (d.demand_throughput) consumer += fmt::format("; demand {} outputs/s", Rate(*d.demand_throughput));
    lines.emplace_back("consumer", consumer);
  }
  std::string cpu = d.cores_used >= 0
                        ? fmt::format("{} of {} cores used", Cores(d.cores_used), CoreCount(d.cores))
                        : fmt::format("{} cores (process CPU not measured)", CoreCount(d.cores));
  if (d.cpu_contention > 1.01) cpu += fmt::format("; oversubscribed {:.2f}x", d.cpu_contention);
  lines.emplace_back("cpu", cpu);
  lines.emplace_back(
      "memory", fmt::format("peak RSS {}, buffers {}", FormatBytes(static_cast<double>(d.peak_rss_bytes)),
                            FormatBytes(d.buffer_bytes)));
  if (d.gpu) {
    const GpuAnalysis& a = d.gpu->analysis;
    if (a.verdict == GpuVerdict::kNoActivity) {
      lines.emplace_back("gpu", d.gpu->verdict);
    } else {
      lines.emplace_back("gpu",
                         fmt::format("busy {} ({} activities, {} device{}); input stalls {} of the idle time",
                                     Percent(d.gpu->busy_fraction), d.gpu->activities, a.devices.size(),
                                     a.devices.size() == 1 ? "" : "s", Percent(a.input_stall_share)));
      lines.emplace_back("gpu verdict", d.gpu->verdict);
    }
  }
  if (d.dataloader) {
    const DataLoaderSection& dl = *d.dataloader;
    lines.emplace_back("DataLoader", SettingsText(dl.settings));
    lines.emplace_back(
        "batches",
        fmt::format("{} over {} epoch{}, {} worker trace{}; worker start-up {:.3f} s "
                    "per epoch, its fill and drain {:.3f} s",
                    dl.batches, dl.epochs.size(), dl.epochs.size() == 1 ? "" : "s", dl.worker_traces,
                    dl.worker_traces == 1 ? "" : "s", dl.startup_seconds_per_epoch, dl.epoch_end_seconds));
    if (std::string run_length = RunLengthText(dl); !run_length.empty())
      lines.emplace_back("run length", run_length);
    for (const std::string& note : dl.notes) lines.emplace_back("note", note);
  }
  lines.emplace_back("drops", DropsText(d));
  lines.emplace_back("window", d.window_reason);
  if (!d.truncation_warning.empty())
    lines.emplace_back("WARNING", d.truncation_warning);
  else if (!d.ended_cleanly)
    lines.emplace_back("note", "the trace has no end record: the run did not stop cleanly");
  return lines;
}

std::vector<std::string> WhatIfLines(const Diagnosis& d) {
  std::vector<std::string> lines;
  for (const WhatIfOutcome& w : d.what_ifs) {
    if (!w.allowed) {
      lines.push_back(fmt::format("{}: not possible: {}", w.question, w.note));
      continue;
    }
    std::string line = fmt::format("{}: {} outputs/s ({:.2f}x), bound: {}", w.question, Rate(w.throughput),
                                   w.speedup, models::BoundKindName(w.bound));
    if (w.bottleneck) line += fmt::format(", stage {}", *w.bottleneck);
    if (w.cache_bytes) line += fmt::format("; cache holds {}", FormatBytes(*w.cache_bytes));
    if (!w.note.empty()) line += fmt::format(" ({})", w.note);
    lines.push_back(line);
  }
  return lines;
}

}  // namespace pipetune::analyzer::internal

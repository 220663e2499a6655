// The DataLoader report: text, JSON, Markdown and HTML from the same rows.
#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "pipetune/analyzer/dataloader.h"
#include "svg.h"

namespace pipetune::analyzer {
namespace {

struct Row {
  std::string stage;
  std::string kind;
  std::string where;
  uint64_t count;
  double ms_each;
  double ms_per_batch;
};

std::vector<Row> Rows(const DataLoaderProfile& p) {
  std::vector<Row> rows;
  const bool workers = p.settings.num_workers > 0;
  const char* data_where = workers ? "workers" : "main";
  for (const DataLoaderStage& s : p.sample_stages) {
    rows.push_back({s.name, DataLoaderStageKindName(s.kind), data_where, s.count, s.seconds_each * 1e3,
                    s.per_batch * 1e3});
  }
  auto add = [&](const DataLoaderStage& s, const char* where) {
    if (s.count > 0) {
      rows.push_back(
          {s.name, DataLoaderStageKindName(s.kind), where, s.count, s.seconds_each * 1e3, s.per_batch * 1e3});
    }
  };
  add(p.collate, data_where);
  add(p.transfer, "main");
  add(p.pin_memory, workers ? "main (pin thread)" : "main");
  add(p.step, "main");
  return rows;
}

std::string Headline(const DataLoaderDiagnosis& d) {
  return fmt::format("limiting stage: {} ({}); bound: {}", d.predicted.limiting_stage,
                     DataLoaderStageKindName(d.predicted.limiting_kind),
                     DataLoaderBoundName(d.predicted.bound));
}

std::string SettingsLine(const DataLoaderSettings& s) {
  return fmt::format(
      "batch_size={} num_workers={} prefetch_factor={} persistent_workers={} pin_memory={} "
      "sampler={}{}",
      s.batch_size, s.num_workers, s.num_workers > 0 ? std::to_string(s.prefetch_factor) : "-",
      s.persistent_workers ? "True" : "False", s.pin_memory ? "True" : "False",
      s.sampler.empty() ? "?" : s.sampler, s.start_method.empty() ? "" : " start_method=" + s.start_method);
}

std::string EpochsLine(const DataLoaderProfile& p) {
  std::string line;
  for (size_t i = 0; i < p.epochs.size(); ++i) {
    line += fmt::format("{}epoch {}: {} batches, {} workers started in {:.3f} s", i ? "; " : "", i + 1,
                        p.epochs[i].batches, p.epochs[i].workers_started, p.epochs[i].startup_seconds);
  }
  return line;
}

double MiB(double bytes) { return bytes / (1024.0 * 1024.0); }

std::string Text(const DataLoaderDiagnosis& d) {
  const DataLoaderProfile& p = d.profile;
  std::string out = fmt::format("PyTorch DataLoader: {} ({} worker traces)\n", p.trace_path, p.worker_traces);
  out += fmt::format("settings: {}\n", SettingsLine(p.settings));
  out += fmt::format("{}\n", Headline(d));
  out += fmt::format("batches: {}; measured {:.2f} batches/s ({:.1f} samples/s); model {:.2f} batches/s\n",
                     p.batches, d.measured_batches_per_second,
                     d.measured_batches_per_second * p.settings.batch_size, d.predicted.batches_per_second);
  out += fmt::format("consumer waits {:.0f}% of its time in next()\n", d.wait_fraction * 100);
  out += fmt::format("{:<34} {:<16} {:<18} {:>8} {:>10} {:>12}\n", "stage", "kind", "where", "count",
                     "ms each", "ms / batch");
  for (const Row& r : Rows(p)) {
    out +=
        fmt::format("{:<34} {:<16} {:<18} {:>8} {:>10.3f} {:>12.3f}{}\n", r.stage, r.kind, r.where, r.count,
                    r.ms_each, r.ms_per_batch, r.stage == d.predicted.limiting_stage ? "  <- limits" : "");
  }
  out += fmt::format("memory: main {:.0f} MiB, worker {:.0f} MiB each (peak RSS), batch {:.1f} MiB\n",
                     MiB(p.main_rss_bytes), MiB(p.worker_rss_bytes), MiB(p.batch_bytes));
  if (p.worker_traces > 0) {
    out += fmt::format("workers: {} processes, {:.2f} CPU-s in all, CPU {:.2f} of their busy time\n",
                       p.worker_traces, p.worker_cpu_seconds, p.worker_cpu_ratio);
  }
  if (!p.epochs.empty()) out += EpochsLine(p) + "\n";
  for (const std::string& a : d.advice) out += "advice: " + a + "\n";
  for (const std::string& w : p.warnings) out += "warning: " + w + "\n";
  return out;
}

std::string Markdown(const DataLoaderDiagnosis& d) {
  const DataLoaderProfile& p = d.profile;
  std::string out = fmt::format("# PyTorch DataLoader: `{}`\n\n", p.trace_path);
  out += fmt::format("**{}**\n\n", Headline(d));
  out += fmt::format("- settings: `{}`\n", SettingsLine(p.settings));
  out += fmt::format("- measured {:.2f} batches/s, model {:.2f}; the consumer waits {:.0f}% of its time\n\n",
                     d.measured_batches_per_second, d.predicted.batches_per_second, d.wait_fraction * 100);
  out += "| stage | kind | where | count | ms each | ms / batch |\n|---|---|---|---:|---:|---:|\n";
  for (const Row& r : Rows(p)) {
    out += fmt::format("| {}{} | {} | {} | {} | {:.3f} | {:.3f} |\n", r.stage,
                       r.stage == d.predicted.limiting_stage ? " **(limits)**" : "", r.kind, r.where, r.count,
                       r.ms_each, r.ms_per_batch);
  }
  out += "\n";
  if (!p.epochs.empty()) out += "- " + EpochsLine(p) + "\n";
  for (const std::string& a : d.advice) out += "- " + a + "\n";
  for (const std::string& w : p.warnings) out += "- warning: " + w + "\n";
  return out;
}

using internal::Escape;  // svg.h: the report writers' one HTML escape

std::string Html(const DataLoaderDiagnosis& d) {
  const DataLoaderProfile& p = d.profile;
  std::string out =
      "<!doctype html>\n<html><head><meta charset=\"utf-8\"><title>pipetune: DataLoader</title>"
      "<style>body{font-family:sans-serif}td,th{padding:2px 8px}.limits{background:#fdd}</style>"
      "</head><body>\n";
  out += fmt::format("<h1>PyTorch DataLoader</h1>\n<p><b>{}</b></p>\n", Escape(Headline(d)));
  out += fmt::format("<p>settings: <code>{}</code></p>\n", Escape(SettingsLine(p.settings)));
  out +=
      fmt::format("<p>measured {:.2f} batches/s, model {:.2f}; the consumer waits {:.0f}% of its time</p>\n",
                  d.measured_batches_per_second, d.predicted.batches_per_second, d.wait_fraction * 100);
  out +=
      "<table><tr><th>stage</th><th>kind</th><th>where</th><th>count</th><th>ms each</th><th>ms / "
      "batch</th></tr>\n";
  for (const Row& r : Rows(p)) {
    out +=
        fmt::format("<tr{}><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{:.3f}</td><td>{:.3f}</td></tr>\n",
                    r.stage == d.predicted.limiting_stage ? " class=\"limits\"" : "", Escape(r.stage), r.kind,
                    r.where, r.count, r.ms_each, r.ms_per_batch);
  }
  out += "</table>\n<ul>\n";
  if (!p.epochs.empty()) out += "<li>" + Escape(EpochsLine(p)) + "</li>\n";
  for (const std::string& a : d.advice) out += "<li>" + Escape(a) + "</li>\n";
  for (const std::string& w : p.warnings) out += "<li>warning: " + Escape(w) + "</li>\n";
  out += "</ul></body></html>\n";
  return out;
}

std::string Json(const DataLoaderDiagnosis& d) {
  const DataLoaderProfile& p = d.profile;
  nlohmann::json j;
  j["schema_version"] = kReportSchemaVersion;
  j["kind"] = "pytorch_dataloader";
  j["trace"] = p.trace_path;
  j["worker_traces"] = p.worker_traces;
  const DataLoaderSettings& s = p.settings;
  j["settings"] = {
      {"batch_size", s.batch_size},
      {"num_workers", s.num_workers},
      {"prefetch_factor", s.num_workers > 0 ? nlohmann::json(s.prefetch_factor) : nlohmann::json()},
      {"persistent_workers", s.persistent_workers},
      {"pin_memory", s.pin_memory},
      {"sampler", s.sampler},
      {"start_method", s.start_method}};
  j["limiting_stage"] = {{"name", d.predicted.limiting_stage},
                         {"kind", DataLoaderStageKindName(d.predicted.limiting_kind)},
                         {"bound", DataLoaderBoundName(d.predicted.bound)}};
  j["batches"] = p.batches;
  j["measured_batches_per_second"] = d.measured_batches_per_second;
  j["model_batches_per_second"] = d.predicted.batches_per_second;
  j["wait_fraction"] = d.wait_fraction;
  nlohmann::json stages = nlohmann::json::array();
  for (const Row& r : Rows(p)) {
    stages.push_back({{"name", r.stage},
                      {"kind", r.kind},
                      {"where", r.where},
                      {"count", r.count},
                      {"seconds_each", r.ms_each / 1e3},
                      {"seconds_per_batch", r.ms_per_batch / 1e3}});
  }
  j["stages"] = stages;
  j["workers"] = {{"processes", p.worker_traces},
                  {"cpu_seconds", p.worker_cpu_seconds},
                  {"cpu_over_busy_wall", p.worker_cpu_ratio}};
  j["memory"] = {{"main_rss_bytes", p.main_rss_bytes},
                 {"worker_rss_bytes", p.worker_rss_bytes},
                 {"batch_bytes", p.batch_bytes}};
  nlohmann::json epochs = nlohmann::json::array();
  for (const DataLoaderEpoch& e : p.epochs) {
    epochs.push_back({{"batches", e.batches},
                      {"workers_started", e.workers_started},
                      {"startup_seconds", e.startup_seconds}});
  }
  j["epochs"] = epochs;
  j["advice"] = d.advice;
  j["warnings"] = p.warnings;
  return j.dump(2) + "\n";
}

}  // namespace

std::string RenderDataLoaderReport(const DataLoaderDiagnosis& diagnosis, ReportFormat format) {
  switch (format) {
    case ReportFormat::kJson:
      return Json(diagnosis);
    case ReportFormat::kMarkdown:
      return Markdown(diagnosis);
    case ReportFormat::kHtml:
      return Html(diagnosis);
    case ReportFormat::kText:
      break;
  }
  return Text(diagnosis);
}

}  // namespace pipetune::analyzer

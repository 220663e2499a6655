// A job's section of every report (dataloader_job_report.h): the rank
// table, the line under it and the JSON report's "ranks", "straggler" and
// "job", moved here from the writers, which render any kind's processes
// (KindReport::processes) and keys as they come.
#include "dataloader_job_report.h"

#include <fmt/format.h>

#include "format_util.h"
#include "pipetune/base/size.h"

namespace pipetune::analyzer::internal {
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

ReportTable RankTable(const JobSection& job) {
  ReportTable table;
  table.header = {"rank",    "local", "host",    "pid",   "batches/s", "input/s", "data wait",
                  "step ms", "limit", "workers", "cores", "peak RSS",  "ended"};
  table.right_aligned = {true, true, false, true, true, true, true, true, false, true, true, true, false};
  for (size_t i = 0; i < job.ranks.size(); ++i) {
    const RankRow& r = job.ranks[i];
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
    table.highlighted.push_back(job.straggler_row == i);
  }
  return table;
}

std::string StragglerLine(const JobSection& job) {
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

// The rank numbers of the processes read (those that recorded one).
Json RecordedRanks(const JobSection& job) {
  Json ranks = Json::array();
  for (const RankRow& r : job.ranks) {
    if (r.rank) ranks.push_back(*r.rank);
  }
  return ranks;
}

// A job of several processes: every rank's row (docs/report-json.md).
Json RanksJson(const JobSection& job) {
  auto optional_int = [](const std::optional<int>& v) { return v ? Json(*v) : Json(nullptr); };
  Json ranks = Json::array();
  for (const RankRow& r : job.ranks) {
    bool diagnosed = r.error.empty();
    ranks.push_back(Json{
        {"rank", optional_int(r.rank)},
        {"local_rank", optional_int(r.local_rank)},
        {"host", r.host},
        {"pid", r.pid},
        {"trace", r.trace},
        {"batches", r.batches},
        {"throughput", diagnosed ? Number(r.throughput) : Json(nullptr)},
        {"predicted_throughput", diagnosed ? Number(r.predicted_throughput) : Json(nullptr)},
        {"input_throughput", diagnosed ? Number(r.input_throughput) : Json(nullptr)},
        {"stall_fraction", diagnosed ? Number(r.stall_fraction) : Json(nullptr)},
        {"step_ms", diagnosed ? Number(r.step_ms) : Json(nullptr)},
        {"step_cpu_ms", diagnosed && r.step_cpu_ms >= 0 ? Number(r.step_cpu_ms) : Json(nullptr)},
        {"bound", diagnosed ? Json(r.bound) : Json(nullptr)},
        {"bottleneck", Optional(r.bottleneck)},
        {"num_workers", r.workers},
        {"cores_used", diagnosed && r.cores_used >= 0 ? Number(r.cores_used) : Json(nullptr)},
        {"peak_rss_bytes", r.peak_rss_bytes},
        {"start_seconds", Number(r.start_seconds)},
        {"end_seconds", Number(r.end_seconds)},
        {"ended", r.ended},
        {"exit_status", optional_int(r.exit_status)},
        {"exception", r.exception.empty() ? Json(nullptr) : Json(r.exception)},
        {"error", r.error.empty() ? Json(nullptr) : Json(r.error)},
    });
  }
  return ranks;
}

}  // namespace

void AddJobReport(const JobSection& job, KindReport& report) {
  report.processes =
      ProcessesReport{"ranks", "straggler", RankTable(job), StragglerLine(job),
                      job.straggler_row ? "the straggler's stages" : "the slowest rank's stages"};
  report.json.emplace_back("ranks", RanksJson(job));
  report.json.emplace_back("straggler", job.straggler ? Json(*job.straggler) : Json(nullptr));
  report.json.emplace_back("job", Json{{"world_size", job.world_size ? Json(*job.world_size) : Json(nullptr)},
                                       {"hosts", job.hosts},
                                       {"step_seconds", Number(job.step_seconds)},
                                       {"clock", job.clock},
                                       {"recorded_ranks", RecordedRanks(job)},
                                       {"missing_ranks", job.missing_ranks},
                                       {"missing", job.missing}});
}

}  // namespace pipetune::analyzer::internal

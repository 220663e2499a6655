// A job of several DataLoader processes (pipetune/analyzer/dataloader_job.h).
#include "pipetune/analyzer/dataloader_job.h"

#include <fmt/format.h>
#include <stdlib.h>

#include <algorithm>
#include <limits>
#include <map>
#include <memory>
#include <set>
#include <utility>

#include "dataloader_job_report.h"
#include "format_util.h"
#include "pipetune/analyzer/dataloader_model.h"
#include "pipetune/models/rate_model.h"

namespace pipetune::analyzer {
namespace {

// The path a file is known by, so that one given twice (or as T and as a
// sibling of T) is read once.
std::string Canonical(const std::string& path) {
  std::unique_ptr<char, decltype(&::free)> real(::realpath(path.c_str(), nullptr), &::free);
  return real ? std::string(real.get()) : path;
}

std::string RankName(const DataLoaderProfile& p) {
  return p.rank ? fmt::format("rank {}", *p.rank) : fmt::format("pid {}", p.pid);
}

// One process, read whole. Its record's own failure (it took no batch)
// leaves it in the job as a row with `error`; a trace that is no
// DataLoader's main trace at all is the user's mistake.
StatusOr<DataLoaderJobProcess> ReadProcess(const std::string& path, bool alone) {
  PIPETUNE_ASSIGN_OR_RETURN(DataLoaderTraces traces, LoadDataLoaderTraces(path));
  DataLoaderJobProcess process;
  StatusOr<DataLoaderProfile> profile = MakeDataLoaderProfile(traces.main, traces.workers);
  if (profile.ok()) {
    process.profile = std::move(*profile);
    for (const std::string& s : traces.skipped)
      process.profile.warnings.push_back("skipped a worker's trace: " + s);
    return process;
  }
  process.profile = DescribeDataLoaderProcess(traces.main);
  if (alone || !IsDataLoaderMainTrace(traces.main)) return profile.status();
  process.error = profile.status().message();
  return process;
}

// Two traces of one rank are two runs given together; ranks of different
// world sizes are not one job.
Status CheckRanks(const std::vector<DataLoaderJobProcess>& processes) {
  std::map<int, const DataLoaderProfile*> by_rank;
  const DataLoaderProfile* sized = nullptr;
  for (const DataLoaderJobProcess& process : processes) {
    const DataLoaderProfile& p = process.profile;
    if (p.world_size) {
      if (sized != nullptr && *sized->world_size != *p.world_size) {
        return InvalidInput(fmt::format("{} (world size {}) and {} (world size {}) are not one job",
                                        sized->trace_path, *sized->world_size, p.trace_path, *p.world_size));
      }
      sized = &p;
    }
    if (!p.rank) continue;
    auto [it, inserted] = by_rank.emplace(*p.rank, &p);
    if (!inserted) {
      return InvalidInput(fmt::format("{} and {} are both rank {}: traces of two runs given together?",
                                      it->second->trace_path, p.trace_path, *p.rank));
    }
  }
  return Status::Ok();
}

// The ranks below the world size that no process read recorded. A world
// size past what any job runs is a damaged record's: nothing is listed
// (fuzz/trace_analysis_fuzz.cc would have it allocate a vector per rank).
void FindMissingRanks(DataLoaderJob& job) {
  constexpr int kMostRanks = 1 << 20;
  std::set<int> recorded;
  for (const DataLoaderJobProcess& process : job.processes) {
    const DataLoaderProfile& p = process.profile;
    if (p.world_size && *p.world_size > 0) job.world_size = p.world_size;
    if (p.rank) recorded.insert(*p.rank);
  }
  if (!job.world_size || *job.world_size > kMostRanks) return;
  for (int rank = 0; rank < *job.world_size; ++rank) {
    if (recorded.count(rank) != 0) continue;
    if (job.missing < kMostListedRanks) job.missing_ranks.push_back(rank);
    ++job.missing;
  }
}

// Every process's session on one timeline, its zero the earliest start.
void PlaceOnTimeline(DataLoaderJob& job) {
  std::set<std::string> hosts;
  for (const DataLoaderJobProcess& process : job.processes) hosts.insert(process.profile.hostname);
  job.hosts = static_cast<int>(hosts.size());
  const bool realtime = hosts.size() > 1;
  job.clock = realtime ? "CLOCK_REALTIME" : "CLOCK_MONOTONIC";
  auto start = [&](const DataLoaderProfile& p) {
    return realtime ? static_cast<double>(p.start_unix_ns) : static_cast<double>(p.start_monotonic_ns);
  };
  double zero = std::numeric_limits<double>::max();
  for (const DataLoaderJobProcess& process : job.processes) zero = std::min(zero, start(process.profile));
  for (DataLoaderJobProcess& process : job.processes) {
    process.start_seconds = (start(process.profile) - zero) / 1e9;
    process.end_seconds = process.start_seconds + process.profile.duration_seconds;
  }
}

}  // namespace

bool IsDataLoaderJob(const std::vector<std::string>& traces) {
  return traces.size() > 1 || (traces.size() == 1 && JobTracePaths(traces[0]).size() > 1);
}

StatusOr<DataLoaderJob> ReadDataLoaderJob(const std::vector<std::string>& traces) {
  if (traces.empty()) return InvalidInput("no trace given");
  std::vector<std::string> paths;
  std::set<std::string> seen;
  for (const std::string& trace : traces) {
    for (const std::string& path : JobTracePaths(trace)) {
      if (seen.insert(Canonical(path)).second) paths.push_back(path);
    }
  }
  DataLoaderJob job;
  const DataLoaderJobProcess* first_error = nullptr;
  for (const std::string& path : paths) {
    PIPETUNE_ASSIGN_OR_RETURN(DataLoaderJobProcess process, ReadProcess(path, paths.size() == 1));
    job.processes.push_back(std::move(process));
  }
  size_t profiled = 0;
  for (const DataLoaderJobProcess& process : job.processes) {
    if (process.error.empty()) ++profiled;
    if (!process.error.empty() && first_error == nullptr) first_error = &process;
  }
  if (profiled == 0) return InvalidInput(first_error->error);
  std::stable_sort(job.processes.begin(), job.processes.end(),
                   [](const DataLoaderJobProcess& a, const DataLoaderJobProcess& b) {
                     const auto& ra = a.profile.rank;
                     const auto& rb = b.profile.rank;
                     if (ra.has_value() != rb.has_value()) return ra.has_value();
                     if (ra && *ra != *rb) return *ra < *rb;
                     return a.profile.trace_path < b.profile.trace_path;
                   });
  PIPETUNE_RETURN_IF_ERROR(CheckRanks(job.processes));
  FindMissingRanks(job);
  PlaceOnTimeline(job);
  return job;
}

namespace {

// The job's step: the fastest rank's (see the header).
double JobStepSeconds(const DataLoaderJob& job) {
  double step = 0;
  for (const DataLoaderJobProcess& process : job.processes) {
    const DataLoaderStage& s = process.profile.step;
    if (!process.error.empty() || s.count == 0) continue;
    if (step == 0 || s.seconds_each < step) step = s.seconds_each;
  }
  return step;
}

// The rank's step set to the job's when its own, measured, includes a wait
// for the straggler; true when it did.
bool AtJobStep(DataLoaderProfile& run, double step_seconds) {
  if (step_seconds <= 0 || run.step.count == 0 || run.step.seconds_each <= step_seconds) return false;
  run.step.seconds_each = run.step.per_batch = step_seconds;
  return true;
}

RankRow IdentityRow(const DataLoaderJobProcess& process) {
  const DataLoaderProfile& p = process.profile;
  RankRow row;
  row.rank = p.rank;
  row.local_rank = p.local_rank;
  row.host = p.hostname;
  row.pid = p.pid;
  row.trace = p.trace_path;
  row.start_seconds = process.start_seconds;
  row.end_seconds = process.end_seconds;
  row.exit_status = p.exit_status;
  row.exception = p.exit_exception;
  row.ended = HowItEnded(p);
  row.error = process.error;
  return row;
}

// What the rank's input side alone delivers: its model with the step taken
// away (the consumer drains), without worker start-up (every rank starts
// its workers at each epoch together and waits for the last: start-up is
// the job's, not one rank's).
double InputThroughput(const Diagnosis& d) {
  models::Configuration drain = models::ObservedConfiguration(d.profile);
  drain.step_time_seconds = std::nullopt;
  return models::Predict(d.profile, drain).steady_throughput;
}

void FillRow(const Diagnosis& d, const DataLoaderProfile& measured, RankRow& row) {
  row.batches = measured.batches;
  row.throughput = d.measured_throughput;
  row.predicted_throughput = d.predicted_throughput;
  row.input_throughput = InputThroughput(d);
  row.stall_fraction = d.stall_fraction;
  row.step_ms = measured.step.seconds_each * 1e3;
  row.step_cpu_ms = measured.step.cpu_seconds_each >= 0 ? measured.step.cpu_seconds_each * 1e3 : -1;
  row.bound = models::BoundKindName(d.bound);
  row.bottleneck = d.bottleneck;
  row.workers = measured.settings.num_workers;
  row.cores_used = d.cores_used;
  row.peak_rss_bytes = d.peak_rss_bytes;
}

// DDP holds every rank to the slowest rank's rate: a rank whose own model
// predicts more (its input is cheaper) takes its steps at the job's rate,
// the least any diagnosed rank's model predicts, and waits the rest at the
// all-reduce. Measured, every rank's rate is the job's; predicted alone, the
// faster ranks read 1.2-1.3x their measured rate
// (bench/pytorch/ddp_straggler.py).
void AtJobRate(std::vector<RankRow>& ranks) {
  double job_rate = 0;
  for (const RankRow& row : ranks) {
    if (row.error.empty() && (job_rate == 0 || row.predicted_throughput < job_rate))
      job_rate = row.predicted_throughput;
  }
  for (RankRow& row : ranks) {
    if (row.error.empty()) row.predicted_throughput = std::min(row.predicted_throughput, job_rate);
  }
}

// The rank's input side binds the job: it delivers less than the job's
// step takes.
bool InputBinds(const RankRow& row, double step_seconds) {
  return step_seconds <= 0 || row.input_throughput * step_seconds < 1.0;
}

// "ranks 1, 2 and 3", "rank 1", "ranks 0, 1, ... and 62 more".
std::string RankList(const std::vector<int>& ranks, int count) {
  std::vector<std::string> names;
  for (size_t i = 0; i < ranks.size() && i < 8; ++i) names.push_back(std::to_string(ranks[i]));
  int more = count - static_cast<int>(names.size());
  std::string list = names.empty() ? "" : names.front();
  for (size_t i = 1; i < names.size(); ++i)
    list += (i + 1 == names.size() && more == 0 ? " and " : ", ") + names[i];
  if (more > 0) list += fmt::format(" and {} more", more);
  return fmt::format("rank{} {}", count == 1 ? "" : "s", list);
}

// A job whose record names more ranks than were read: which are there and
// which are not, so that no one takes the verdicts for the whole job's.
std::string MissingRanksSentence(const JobSection& job) {
  if (job.missing == 0 || !job.world_size) return "";
  std::vector<int> recorded;
  for (const RankRow& row : job.ranks) {
    if (row.rank) recorded.push_back(*row.rank);
  }
  const int present = *job.world_size - job.missing;
  return fmt::format(
      "The job had {} ranks (its world size); {} {} recorded{}; {} missing ({} no trace among those read: "
      "a node's traces not copied, or a file deleted). These verdicts are the recorded ranks' only. ",
      *job.world_size, present, present == 1 ? "was" : "were",
      recorded.empty() ? "" : " (" + RankList(recorded, static_cast<int>(recorded.size())) + ")",
      RankList(job.missing_ranks, job.missing) + (job.missing == 1 ? " is" : " are"),
      job.missing == 1 ? "it left" : "they left");
}

// `headline_row`: the rank whose diagnosis the report shows.
std::string JobSummary(const JobSection& job, size_t headline_row) {
  const RankRow& row = job.ranks[headline_row];
  std::string who = row.rank ? fmt::format("Rank {}", *row.rank) : fmt::format("Process {}", row.pid);
  double step_rate = job.step_seconds > 0 ? 1.0 / job.step_seconds : 0;
  const auto diagnosed =
      std::count_if(job.ranks.begin(), job.ranks.end(), [](const RankRow& r) { return r.error.empty(); });
  if (diagnosed < 2) {
    return fmt::format(
        "With one rank diagnosed no straggler can be named; {}'s own diagnosis follows, at its own step "
        "({:.1f} ms, any wait at the all-reduce for the other ranks included). ",
        who, job.step_seconds * 1e3);
  }
  if (job.straggler_row) {
    return fmt::format(
        "{} is the straggler: its input side delivers {} batches/s where the job's step allows {} (the "
        "fastest rank's step, {:.1f} ms); the other ranks wait for it at the all-reduce. ",
        who, internal::Rate(row.input_throughput), internal::Rate(step_rate), job.step_seconds * 1e3);
  }
  return fmt::format(
      "No rank's input side binds: every rank's input keeps up with the job's step ({:.1f} ms); "
      "{}'s, the least ({} batches/s), is diagnosed below. ",
      job.step_seconds * 1e3, who, internal::Rate(row.input_throughput));
}

}  // namespace

StatusOr<Diagnosis> DiagnoseDataLoaderJob(const DataLoaderJob& job, const DiagnoseOptions& options) {
  if (job.processes.empty()) return InvalidInput("no process to diagnose");
  if (job.processes.size() == 1 && job.missing == 0) {
    if (!job.processes[0].error.empty()) return InvalidInput(job.processes[0].error);
    return DiagnoseDataLoader(job.processes[0].profile, options);
  }
  JobSection section;
  section.step_seconds = JobStepSeconds(job);
  section.clock = job.clock;
  section.hosts = job.hosts;
  section.world_size = job.world_size;
  section.missing_ranks = job.missing_ranks;
  section.missing = job.missing;
  std::optional<Diagnosis> headline;
  std::optional<size_t> headline_row;
  for (const DataLoaderJobProcess& process : job.processes) {
    RankRow row = IdentityRow(process);
    if (process.profile.world_size) section.world_size = process.profile.world_size;
    if (!process.error.empty()) {
      section.ranks.push_back(std::move(row));
      continue;
    }
    DataLoaderProfile run = process.profile;
    const bool waited = AtJobStep(run, section.step_seconds);
    PIPETUNE_ASSIGN_OR_RETURN(Diagnosis d, DiagnoseDataLoader(run, options));
    if (waited) {
      d.assumptions.push_back(fmt::format(
          "{}'s step measured {:.1f} ms, its wait for the slowest rank at the all-reduce included: it is "
          "diagnosed at the job's step, the fastest rank's {:.1f} ms",
          RankName(run), process.profile.step.seconds_each * 1e3, section.step_seconds * 1e3));
    }
    FillRow(d, process.profile, row);
    section.ranks.push_back(std::move(row));
    // The headline: the rank whose input delivers least (the straggler
    // when that binds). Only that rank's diagnosis is kept.
    if (!headline || section.ranks.back().input_throughput < section.ranks[*headline_row].input_throughput) {
      headline = std::move(d);
      headline_row = section.ranks.size() - 1;
    }
  }
  AtJobRate(section.ranks);
  Diagnosis d = std::move(*headline);
  // A straggler is one rank against the others: with one rank diagnosed
  // (the rest missing or without a batch) there is none to name.
  const auto diagnosed = std::count_if(section.ranks.begin(), section.ranks.end(),
                                       [](const RankRow& row) { return row.error.empty(); });
  if (diagnosed >= 2 && InputBinds(section.ranks[*headline_row], section.step_seconds)) {
    section.straggler_row = headline_row;
    section.straggler = section.ranks[*headline_row].rank;
  }
  section.headline_row = *headline_row;
  section.summary = MissingRanksSentence(section) + JobSummary(section, *headline_row);
  d.summary = section.summary + d.summary;
  if (!d.kind_report) d.kind_report.emplace();
  internal::AddJobReport(section, *d.kind_report);
  d.job = std::move(section);
  return d;
}

namespace {

// On-CPU seconds per batch of the rank's main thread in its loop and of its
// workers (the model profile's process CPU); 0 when not measured.
double CpuSecondsPerBatch(const DataLoaderProfile& run) {
  if (run.batches <= 0) return 0;
  models::Profile profile = DataLoaderModelProfile(run);
  return std::max(0.0, profile.process_cpu_cores * profile.window_seconds / profile.outputs);
}

}  // namespace

double NodeCoreShare(const DataLoaderProfile& rank, const std::vector<DataLoaderProfile>& peers,
                     int ranks_on_node) {
  const int ranks = std::max({1, ranks_on_node, static_cast<int>(peers.size()) + 1});
  if (ranks == 1) return 1.0;
  const double own = CpuSecondsPerBatch(rank);
  double total = own * (ranks - static_cast<int>(peers.size()));
  for (const DataLoaderProfile& peer : peers) {
    const double cpu = CpuSecondsPerBatch(peer);
    if (cpu <= 0) return 1.0 / ranks;
    total += cpu;
  }
  if (own <= 0 || total <= 0) return 1.0 / ranks;
  return own / total;
}

StatusOr<JobTuning> JobTuningRun(const DataLoaderJob& job) {
  PIPETUNE_ASSIGN_OR_RETURN(Diagnosis d, DiagnoseDataLoaderJob(job));
  JobTuning tuning;
  tuning.processes = static_cast<int>(job.processes.size());
  std::map<std::string, int> per_host;
  for (const DataLoaderJobProcess& process : job.processes) {
    tuning.ranks_per_node = std::max(tuning.ranks_per_node, ++per_host[process.profile.hostname]);
  }
  if (!d.job) {
    tuning.run = job.processes[0].profile;
    return tuning;
  }
  const DataLoaderJobProcess& chosen = job.processes[d.job->headline_row];
  tuning.run = chosen.profile;
  tuning.rank = chosen.profile.rank;
  tuning.straggler = d.job->straggler_row.has_value();
  AtJobStep(tuning.run, d.job->step_seconds);
  for (size_t i = 0; i < job.processes.size(); ++i) {
    const DataLoaderJobProcess& peer = job.processes[i];
    if (i == d.job->headline_row || !peer.error.empty() || peer.profile.hostname != chosen.profile.hostname)
      continue;
    tuning.node_peers.push_back(peer.profile);
    AtJobStep(tuning.node_peers.back(), d.job->step_seconds);
  }
  tuning.node_core_share = NodeCoreShare(tuning.run, tuning.node_peers, tuning.ranks_per_node);
  return tuning;
}

StatusOr<DataLoaderProfile> ReadSlowestRank(const std::string& trace) {
  if (!IsDataLoaderJob({trace})) return ReadDataLoaderProfile(trace);
  PIPETUNE_ASSIGN_OR_RETURN(DataLoaderJob job, ReadDataLoaderJob({trace}));
  PIPETUNE_ASSIGN_OR_RETURN(JobTuning tuning, JobTuningRun(job));
  return std::move(tuning.run);
}

}  // namespace pipetune::analyzer

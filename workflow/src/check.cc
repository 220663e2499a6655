// The CI gate's judgement (check.h); the renderings are in check_report.cc.
#include "pipetune/workflow/check.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>

#include "gate_judge.h"
#include "pipetune/base/numbers.h"
#include "pipetune/models/rate_model.h"

namespace pipetune::workflow {
namespace {

// A stage below this share of the pipeline's CPU per output is not judged.
constexpr double kMinJudgedShare = 0.05;
// Costs that all moved within this spread of one another moved "by one
// factor" (at least; the tolerance when larger).
constexpr double kMinDriftSpread = 0.10;

// The stage's CPU seconds per element in each run (0 when the run lacks it).
std::vector<double> CpuSamples(const std::vector<RunRecord>& runs, const std::string& stage) {
  std::vector<double> samples;
  for (const RunRecord& run : runs) {
    for (const StageRun& s : run.stages) {
      if (s.name == stage) samples.push_back(s.cpu_seconds_per_element);
    }
  }
  return samples;
}

// A stage is latency-bound when its wall time per element exceeds its CPU
// time by more than this (the analyzer's rule).
constexpr double kLatencyBoundRatio = 2;

// Per run: wall time over CPU time of the named stages together (1: every
// thread had a core whenever it was runnable).
std::vector<double> WaitRatios(const std::vector<RunRecord>& runs, const std::vector<std::string>& names) {
  std::vector<double> ratios;
  for (const RunRecord& run : runs) {
    double wall = 0, cpu = 0;
    for (const StageRun& s : run.stages) {
      if (std::find(names.begin(), names.end(), s.name) == names.end()) continue;
      wall += s.wall_seconds_per_element * s.visit_ratio;
      cpu += s.cpu_seconds_per_element * s.visit_ratio;
    }
    if (cpu > 0) ratios.push_back(wall / cpu);
  }
  return ratios;
}

std::vector<double> Throughputs(const std::vector<RunRecord>& runs) {
  std::vector<double> samples;
  samples.reserve(runs.size());
  for (const RunRecord& run : runs) samples.push_back(run.throughput);
  return samples;
}

}  // namespace

namespace internal {

void JudgeRuns(const Baseline& baseline, const std::vector<RunRecord>& runs, const JudgeOptions& options,
               CheckReport& report) {
  report.timed = true;
  report.throughput = EstimateShift(Throughputs(baseline.runs), Throughputs(runs), options.confidence);

  // Each stage's share of the CPU per output, from the baseline's medians.
  std::vector<double> per_output;
  double total = 0;
  const std::vector<StageRun>& first = baseline.runs.front().stages;
  for (const StageRun& s : first) {
    double cost = Median(CpuSamples(baseline.runs, s.name)) * s.visit_ratio;
    per_output.push_back(cost);
    total += cost;
  }
  std::vector<double> judged_ratios;
  for (size_t i = 0; i < first.size(); ++i) {
    StageCheck stage;
    stage.name = first[i].name;
    stage.cpu_per_element = EstimateShift(CpuSamples(baseline.runs, stage.name), CpuSamples(runs, stage.name),
                                          options.confidence);
    double share = total > 0 ? per_output[i] / total : 0;
    stage.judged = share >= kMinJudgedShare && stage.cpu_per_element.new_runs > 0;
    if (!stage.judged) {
      stage.why = stage.cpu_per_element.new_runs == 0
                      ? "not measured in the new runs"
                      : fmt::format("not judged: {:.1f}% of the pipeline's CPU per output", share * 100);
    } else {
      stage.regressed = IncreasedBeyond(stage.cpu_per_element, options.tolerance);
      judged_ratios.push_back(1 + stage.cpu_per_element.change);
    }
    report.stages.push_back(std::move(stage));
  }

  // Drift: two or more judged stages, all grown beyond the tolerance, by one factor.
  size_t judged = 0, grown = 0;
  for (const StageCheck& s : report.stages) {
    judged += s.judged ? 1 : 0;
    grown += s.regressed ? 1 : 0;
  }
  if (judged >= 2 && grown == judged) {
    auto [lo, hi] = std::minmax_element(judged_ratios.begin(), judged_ratios.end());
    if (*hi / *lo - 1 <= std::max(options.tolerance, kMinDriftSpread)) {
      report.machine_drift = true;
      report.machine_factor = Median(judged_ratios);
    }
  }
  for (StageCheck& s : report.stages) {
    if (!s.judged) continue;
    const Shift& c = s.cpu_per_element;
    std::string interval = c.has_interval ? fmt::format(" ({:.0f}% interval {:+.1f}%..{:+.1f}%)",
                                                        c.confidence * 100, c.low * 100, c.high * 100)
                                          : " (too few runs for an interval)";
    if (report.machine_drift) {
      s.regressed = false;
      s.why =
          fmt::format("CPU per element {:+.1f}%{}, as every stage's: the machine", c.change * 100, interval);
    } else if (s.regressed) {
      s.why = fmt::format("CPU per element {:+.1f}%{}, beyond the {:.0f}% tolerance", c.change * 100,
                          interval, options.tolerance * 100);
    } else {
      s.why = fmt::format("CPU per element {:+.1f}%{}: within tolerance or noise", c.change * 100, interval);
    }
  }
  report.throughput_regressed =
      !report.machine_drift && DecreasedBeyond(report.throughput, options.tolerance);

  // A busier machine: throughput fell, no stage costs more, and the CPU-bound
  // stages' wall time per element grew against their CPU time (their threads
  // waited for a core other processes held). Latency-bound stages are left
  // out: their wall time is their work.
  bool any_stage = std::any_of(report.stages.begin(), report.stages.end(),
                               [](const StageCheck& s) { return s.regressed; });
  if (report.throughput_regressed && !any_stage) {
    std::vector<std::string> cpu_bound;
    for (size_t i = 0; i < first.size(); ++i) {
      if (report.stages[i].judged &&
          first[i].wall_seconds_per_element <= kLatencyBoundRatio * first[i].cpu_seconds_per_element)
        cpu_bound.push_back(first[i].name);
    }
    report.contention =
        EstimateShift(WaitRatios(baseline.runs, cpu_bound), WaitRatios(runs, cpu_bound), options.confidence);
    if (!cpu_bound.empty() && IncreasedBeyond(report.contention, options.tolerance)) {
      report.throughput_regressed = false;
      report.machine_busy = true;
    }
  }
}

void ReportRuns(const Baseline& baseline, const MeasuredRuns& measured, CheckReport& report) {
  report.bottleneck = measured.bottleneck;
  report.why = measured.why;
  const tracer::HostFacts& before = baseline.host;
  const tracer::HostFacts& now = measured.host;
  if (now.UsableCores() > 0 && before.cores_allowed > 0 && now.cores_allowed != before.cores_allowed)
    report.notes.push_back(fmt::format("the baseline was recorded with {} cores allowed, these runs had {}",
                                       before.cores_allowed, now.cores_allowed));
  if (!before.hostname.empty() && before.hostname != now.hostname)
    report.notes.push_back(
        fmt::format("the baseline was recorded on {}, these runs on {}", before.hostname, now.hostname));
}

void Conclude(CheckReport& report) {
  bool stage_regressed = std::any_of(report.stages.begin(), report.stages.end(),
                                     [](const StageCheck& s) { return s.regressed; });
  if (report.config_regressed || stage_regressed || report.throughput_regressed) {
    report.verdict = Verdict::kRegression;
  } else if (report.machine_drift || report.machine_busy) {
    report.verdict = Verdict::kMachine;
  }
}

}  // namespace internal

const char* VerdictName(Verdict verdict) {
  switch (verdict) {
    case Verdict::kPass:
      return "pass";
    case Verdict::kRegression:
      return "regression";
    case Verdict::kMachine:
      return "machine";
  }
  return "pass";
}

namespace internal {

Status SameStages(const std::vector<StageIdentity>& before, const std::vector<StageIdentity>& now,
                  const std::string& other, const std::string& now_name, const std::string& count_note) {
  auto names = [](const std::vector<StageIdentity>& ids) {
    std::string joined;
    for (const StageIdentity& id : ids) joined += (joined.empty() ? "" : ", ") + id.name;
    return joined;
  };
  if (before.size() != now.size())
    return InvalidInput(other + fmt::format("its stages are [{}], {}'s [{}]{}", names(before), now_name,
                                            names(now), count_note));
  for (size_t i = 0; i < before.size(); ++i) {
    if (before[i].name != now[i].name)
      return InvalidInput(other + fmt::format("stage #{} is \"{}\" in the baseline, \"{}\" in {}", i + 1,
                                              before[i].name, now[i].name, now_name));
    if (before[i].op != now[i].op || before[i].fn != now[i].fn)
      return InvalidInput(other + fmt::format("stage \"{}\" runs {}{} in the baseline, {}{} in {}",
                                              now[i].name, before[i].op,
                                              before[i].fn.empty() ? "" : " " + before[i].fn, now[i].op,
                                              now[i].fn.empty() ? "" : " " + now[i].fn, now_name));
  }
  return Status::Ok();
}

}  // namespace internal

CheckOutcome OutcomeOf(const CheckReport& report, bool strict_machine) {
  if (report.verdict == Verdict::kRegression) return CheckOutcome::kFailed;
  if (report.verdict == Verdict::kMachine && strict_machine) return CheckOutcome::kFailed;
  return CheckOutcome::kPassed;
}

}  // namespace pipetune::workflow

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

bool IsKnobOp(const std::string& op) { return op == "prefetch" || op == "cache"; }

std::vector<internal::StageIdentity> IdentitiesOf(const std::vector<StageKnobs>& stages) {
  std::vector<internal::StageIdentity> ids;
  for (const StageKnobs& s : stages) {
    if (!IsKnobOp(s.op)) ids.push_back({s.name, s.op, s.fn});
  }
  return ids;
}

std::string Spell(const std::optional<int64_t>& v) { return v ? std::to_string(*v) : "none"; }

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

// The knobs of `config` as the model's configuration over the baseline's
// profile; the stages are matched by name.
models::Configuration ConfigurationFor(const models::Profile& profile, const std::vector<StageKnobs>& knobs) {
  models::Configuration conf = models::ObservedConfiguration(profile);
  conf.cache_after.reset();
  for (size_t k = 0; k < knobs.size(); ++k) {
    std::optional<size_t> index = profile.FindStage(knobs[k].name);
    if (index && profile.stages[*index].parallel)
      conf.parallelism[*index] = std::max(1, knobs[k].parallelism);
    if (knobs[k].op == "cache" && k > 0) {
      // A cache after the nearest earlier stage the profile knows.
      for (size_t j = k; j-- > 0;) {
        if (std::optional<size_t> before = profile.FindStage(knobs[j].name)) {
          conf.cache_after = *before;
          break;
        }
      }
    }
  }
  return conf;
}

double PredictFor(const models::Profile& profile, const std::vector<StageKnobs>& knobs) {
  return models::Predict(profile, ConfigurationFor(profile, knobs)).throughput;
}

// The knobs that differ between the baseline's stages and `now`'s, each
// with the baseline's stages with only that change made (to price it).
std::vector<internal::KnobDifference<std::vector<StageKnobs>>> KnobDifferences(
    const std::vector<StageKnobs>& before, const std::vector<StageKnobs>& now) {
  std::vector<internal::KnobDifference<std::vector<StageKnobs>>> differences;
  std::map<std::string, size_t> now_index;
  for (size_t i = 0; i < now.size(); ++i) now_index[now[i].name] = i;
  std::map<std::string, size_t> before_index;
  for (size_t i = 0; i < before.size(); ++i) before_index[before[i].name] = i;

  for (size_t i = 0; i < before.size(); ++i) {
    const StageKnobs& b = before[i];
    auto found = now_index.find(b.name);
    if (found == now_index.end()) {  // a prefetch or cache stage removed
      std::optional<std::vector<StageKnobs>> changed;
      if (b.op == "cache") {
        changed = before;
        changed->erase(changed->begin() + static_cast<std::ptrdiff_t>(i));
      }
      differences.push_back(
          {{b.name, b.op == "cache" ? "cache" : "buffer",
            b.op == "cache" ? b.location.value_or("memory") : Spell(b.buffer), "none", std::nullopt},
           changed});
      continue;
    }
    const StageKnobs& n = now[found->second];
    if (b.parallelism != n.parallelism) {
      std::vector<StageKnobs> changed = before;
      changed[i].parallelism = n.parallelism;
      differences.push_back({{b.name, "parallelism", std::to_string(b.parallelism),
                              std::to_string(n.parallelism), std::nullopt},
                             changed});
    }
    if (b.buffer != n.buffer)
      differences.push_back(
          {{b.name, "buffer", Spell(b.buffer), Spell(n.buffer), std::nullopt}, std::nullopt});
    if (b.location != n.location)
      differences.push_back(
          {{b.name, "cache", b.location.value_or("none"), n.location.value_or("none"), std::nullopt},
           std::nullopt});
  }
  for (size_t i = 0; i < now.size(); ++i) {
    const StageKnobs& n = now[i];
    if (before_index.count(n.name)) continue;
    std::optional<std::vector<StageKnobs>> changed;
    if (n.op == "cache") {
      changed = before;
      // Insert it after the stage it follows in the new config.
      size_t at = 0;
      for (size_t j = i; j-- > 0;) {
        auto known = before_index.find(now[j].name);
        if (known != before_index.end()) {
          at = known->second + 1;
          break;
        }
      }
      changed->insert(changed->begin() + static_cast<std::ptrdiff_t>(at), n);
    }
    differences.push_back({{n.name, n.op == "cache" ? "cache" : "buffer", "none",
                            n.op == "cache" ? n.location.value_or("memory") : Spell(n.buffer), std::nullopt},
                           changed});
  }
  return differences;
}

// A config's knobs priced on the baseline's profile (the config's stages
// are the baseline's, SamePipeline).
void JudgeConfig(const Baseline& baseline, const std::vector<StageKnobs>& now, const JudgeOptions& options,
                 CheckReport& report) {
  std::function<double(const std::vector<StageKnobs>&)> predict;
  if (!baseline.model.stages.empty())
    predict = [&](const std::vector<StageKnobs>& knobs) { return PredictFor(baseline.model, knobs); };
  internal::JudgeKnobs(predict, baseline.stages, now, KnobDifferences(baseline.stages, now), options, report);
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

Status SamePipeline(const Baseline& baseline, const models::PipelineConfig& config,
                    const std::string& baseline_name) {
  return internal::SameStages(IdentitiesOf(baseline.stages), IdentitiesOf(KnobsOf(config)),
                              fmt::format("{}: a baseline of another pipeline ({}), not compared: ",
                                          baseline_name, baseline.pipeline),
                              "the config", " (prefetch and cache aside)");
}

CheckReport Judge(const Baseline& baseline, const models::PipelineConfig& config,
                  const std::vector<RunRecord>* runs, const JudgeOptions& options) {
  CheckReport report;
  report.pipeline = baseline.pipeline;
  report.tolerance = options.tolerance;
  std::string identity = IdentityHash(config);
  if (identity != baseline.identity)
    report.notes.push_back(fmt::format(
        "the stages' args changed since the baseline (identity {} -> {}): the same pipeline, costs compared",
        baseline.identity, identity));
  JudgeConfig(baseline, KnobsOf(config), options, report);
  if (runs != nullptr && !runs->empty() && !baseline.runs.empty())
    internal::JudgeRuns(baseline, *runs, options, report);
  internal::Conclude(report);
  return report;
}

StatusOr<CheckReport> Check(const CheckRequest& request) {
  if (request.judge.tolerance < 0 || request.judge.tolerance >= 1)
    return InvalidInput(
        fmt::format("--tolerance: expected a percentage in [0, 100), got {}", request.judge.tolerance * 100));
  PIPETUNE_ASSIGN_OR_RETURN(Baseline baseline, LoadBaseline(request.baseline_path));
  BaselineRequest runs{request.config_path, request.traces, request.runs, request.seconds, "",
                       request.command};
  internal::RunKind kind = internal::RunKindFor(runs, &baseline);
  PIPETUNE_RETURN_IF_ERROR(kind.prepare(request, baseline));
  std::optional<MeasuredRuns> measured;
  if (!request.traces.empty() || request.runs > 0 || !kind.judges_without_runs) {
    PIPETUNE_ASSIGN_OR_RETURN(measured, internal::MeasureRunsOf(kind, runs, /*diagnose=*/true));
    PIPETUNE_RETURN_IF_ERROR(kind.same(baseline, *measured, request.baseline_path));
  }
  CheckReport report = kind.judge(baseline, measured ? &*measured : nullptr, request.judge);
  if (measured) {
    internal::ReportRuns(baseline, *measured, report);
  } else {
    report.notes.push_back("config only: no runs (--runs 0)");
  }
  return report;
}

CheckOutcome OutcomeOf(const CheckReport& report, bool strict_machine) {
  if (report.verdict == Verdict::kRegression) return CheckOutcome::kFailed;
  if (report.verdict == Verdict::kMachine && strict_machine) return CheckOutcome::kFailed;
  return CheckOutcome::kPassed;
}

}  // namespace pipetune::workflow

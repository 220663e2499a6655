#include "pipetune/workflow/autotune_controller.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <utility>

#include "pipetune/analyzer/collector.h"
#include "pipetune/analyzer/diagnosis.h"
#include "pipetune/tracer/tracer.h"
#include "pipetune/tuner/solver.h"
#include "pipetune/workflow/tune.h"
#include "pipetune/workflow/verify.h"

namespace pipetune::workflow {
namespace {

// After a change, the refit skips this much of the trace: the queues refill
// and the workers above a smaller count leave within it.
constexpr uint64_t kSettleNs = 300'000'000;
// A refit needs this many snapshots (100 ms apart) since the last change.
constexpr size_t kMinFrames = 5;
// Workers a stage may be resized to when no thread budget is given: the
// tuner's default thread budget.
constexpr int kDefaultResizableWorkers = 256;

// The setting a config runs, as the retuning rules name it: its stages'
// workers. Buffers are left out: they follow the workers (the queue model
// sizes them) and move no bound, so two plans with the same workers are one
// setting.
std::string WorkersOf(const models::PipelineConfig& config) {
  std::string setting;
  for (const models::StageConfig& stage : config.stages) {
    if (models::OpIsParallel(stage.op)) setting += fmt::format("{}={};", stage.name, stage.parallelism);
  }
  return setting;
}

// The knob moves that take `from` to `to`, workers first, then buffers.
std::vector<KnobMove> MovesBetween(const models::PipelineConfig& from, const models::PipelineConfig& to) {
  std::vector<KnobMove> workers, buffers;
  for (const models::StageConfig& stage : from.stages) {
    std::optional<size_t> index = to.FindStage(stage.name);
    if (!index) continue;
    const models::StageConfig& target = to.stages[*index];
    if (models::OpIsParallel(stage.op) && target.parallelism != stage.parallelism) {
      workers.push_back({stage.name, tuner::Knob::kParallelism, stage.parallelism, target.parallelism});
    } else if (stage.op == models::Op::kPrefetch && target.buffer.value_or(1) != stage.buffer.value_or(1)) {
      buffers.push_back(
          {stage.name, tuner::Knob::kBuffer, stage.buffer.value_or(1), target.buffer.value_or(1)});
    }
  }
  workers.insert(workers.end(), buffers.begin(), buffers.end());
  return workers;
}

// Sets one knob on a pipeline; the stage's config follows when it took.
Status SetKnob(runtime::Pipeline* pipeline, models::StageConfig& stage, const KnobMove& move) {
  if (move.knob == tuner::Knob::kBuffer) {
    if (pipeline != nullptr) PIPETUNE_RETURN_IF_ERROR(pipeline->SetBuffer(move.stage, move.new_value));
    stage.buffer = move.new_value;
  } else {
    if (pipeline != nullptr)
      PIPETUNE_RETURN_IF_ERROR(pipeline->SetParallelism(move.stage, static_cast<int>(move.new_value)));
    stage.parallelism = static_cast<int>(move.new_value);
  }
  return Status::Ok();
}

}  // namespace

const char* DecisionKindName(AutotuneDecision::Kind kind) {
  switch (kind) {
    case AutotuneDecision::Kind::kChange:
      return "change";
    case AutotuneDecision::Kind::kKept:
      return "kept";
    case AutotuneDecision::Kind::kRolledBack:
      return "rolled back";
    case AutotuneDecision::Kind::kSettled:
      return "settled";
    case AutotuneDecision::Kind::kDeclined:
      return "declined";
  }
  return "?";
}

std::string FormatDecision(const AutotuneDecision& d) {
  std::string line = fmt::format("{:6.1f} s  {:<11}", d.seconds, DecisionKindName(d.kind));
  std::string moves;
  for (const KnobMove& move : d.moves) {
    if (!moves.empty()) moves += ", ";
    moves +=
        fmt::format("{} {} {} -> {}", move.stage, tuner::KnobName(move.knob), move.old_value, move.new_value);
  }
  if (!moves.empty()) line += "  " + moves;
  if (d.predicted > 0) {
    line += fmt::format("  predicted {:.4g}/s, measured {:.4g}/s before", d.predicted, d.measured_before);
  }
  if (d.measured) line += fmt::format(", {:.4g}/s after", *d.measured);
  if (d.refit_ms > 0) line += fmt::format("  (refit {:.0f} ms)", d.refit_ms);
  if (!d.note.empty()) line += "  " + d.note;
  return line;
}

Json DecisionToJson(const AutotuneDecision& d) {
  Json moves = Json::array();
  for (const KnobMove& move : d.moves) {
    moves.push_back({{"stage", move.stage},
                     {"knob", tuner::KnobName(move.knob)},
                     {"old", move.old_value},
                     {"new", move.new_value}});
  }
  return {{"kind", DecisionKindName(d.kind)},
          {"seconds", d.seconds},
          {"moves", std::move(moves)},
          {"predicted", d.predicted},
          {"measured_before", d.measured_before},
          {"measured", d.measured ? Json(*d.measured) : Json(nullptr)},
          {"refit_ms", d.refit_ms},
          {"note", d.note},
          {"line", FormatDecision(d)}};
}

int ResizableWorkers(const tuner::BudgetFlags& budgets) {
  return budgets.max_threads.value_or(kDefaultResizableWorkers);
}

std::string AutotunedConfigPath(const std::string& config_path) {
  std::string tuned = TunedConfigPath("", config_path, "");
  return tuned.substr(0, tuned.size() - std::string("tuned.json").size()) + "autotuned.json";
}

Status ValidateControllerOptions(const AutotuneControllerOptions& options) {
  if (!(options.refit_every_seconds > 0))
    return InvalidInput(
        fmt::format("the refit interval must be > 0 seconds, got {}", options.refit_every_seconds));
  if (!(options.rules.min_gain >= 0 && options.rules.min_gain < 1))
    return InvalidInput(fmt::format("the minimum gain must be in [0, 1), got {}", options.rules.min_gain));
  if (options.rules.max_tries < 1)
    return InvalidInput(fmt::format("the changes tried must be at least 1, got {}", options.rules.max_tries));
  return Status::Ok();
}

AutotuneController::AutotuneController(AutotuneControllerOptions options, models::PipelineConfig config,
                                       std::string trace_path, std::string config_path)
    : options_(std::move(options)),
      config_path_(std::move(config_path)),
      current_(std::move(config)),
      trace_(std::move(trace_path)),
      next_refit_seconds_(options_.refit_every_seconds),
      loop_(options_.rules),
      best_(current_) {}

void AutotuneController::Attach(runtime::Pipeline* pipeline, const models::PipelineConfig& built_from) {
  std::lock_guard<std::mutex> lock(mu_);
  pipeline_ = pipeline;
  if (pipeline == nullptr) return;
  for (models::StageConfig& stage : current_.stages) {
    std::optional<size_t> index = built_from.FindStage(stage.name);
    if (!index) continue;
    const models::StageConfig& built = built_from.stages[*index];
    Status applied = Status::Ok();
    if (models::OpIsParallel(stage.op) && stage.parallelism != built.parallelism) {
      applied = pipeline->SetParallelism(stage.name, stage.parallelism);
    } else if (stage.op == models::Op::kPrefetch && stage.buffer && stage.buffer != built.buffer) {
      applied = pipeline->SetBuffer(stage.name, *stage.buffer);
    }
    // A knob that no longer takes (it did when decided) cannot be lost
    // silently: the config then says what really runs.
    if (!applied.ok()) stage = built;
  }
}

void AutotuneController::Step(double seconds) {
  now_seconds_ = seconds;
  if (settled_ || seconds < next_refit_seconds_) return;
  next_refit_seconds_ = seconds + options_.refit_every_seconds;
  Refit(/*final=*/false);
}

void AutotuneController::Finish() {
  Attach(nullptr, {});
  if (pending_) Refit(/*final=*/true);
  if (pending_) {
    AutotuneDecision undone = *pending_;
    undone.kind = AutotuneDecision::Kind::kRolledBack;
    undone.note = "the run ended before the change could be measured";
    pending_.reset();
    Record(std::move(undone));
  }
  // Still exploring: the written config is the best measured knobs, as a
  // settled run's is.
  if (!settled_) Apply(MovesBetween(current_, best_));
}

models::PipelineConfig AutotuneController::CurrentConfig() const {
  std::lock_guard<std::mutex> lock(mu_);
  return current_;
}

models::PipelineConfig AutotuneController::SettledOn(const models::PipelineConfig& original) const {
  std::lock_guard<std::mutex> lock(mu_);
  models::PipelineConfig settled = original;
  for (models::StageConfig& stage : settled.stages) {
    std::optional<size_t> index = current_.FindStage(stage.name);
    if (!index) continue;
    const models::StageConfig& decided = current_.stages[*index];
    if (models::OpIsParallel(stage.op)) stage.parallelism = decided.parallelism;
    if (stage.op == models::Op::kPrefetch) stage.buffer = decided.buffer;
  }
  return settled;
}

bool AutotuneController::settled() const { return settled_; }

AutotuneStats AutotuneController::TakeStats() {
  stats_.refit_ms_mean = stats_.refits > 0 ? refit_ms_total_ / stats_.refits : 0;
  return std::move(stats_);
}

void AutotuneController::Refit(bool final) {
  auto begin = std::chrono::steady_clock::now();
  StatusOr<std::optional<Refitted>> solved = Solve();
  double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - begin).count();
  if (!solved.ok()) {
    Decline(solved.status().message(), ms);
    return;
  }
  if (!*solved) return;  // too few snapshots since the last change yet
  const Refitted& refitted = **solved;
  ++stats_.refits;
  refit_ms_total_ += ms;
  stats_.refit_ms_max = std::max(stats_.refit_ms_max, ms);
  double measured = refitted.plan.measured_throughput;
  RetuneLoop::Judged judged = loop_.Measured(
      WorkersOf(current_), {measured, refitted.rate_error, static_cast<double>(ThreadsOf(current_))});
  if (judged.verdict == RetuneLoop::Verdict::kFirst || judged.verdict == RetuneLoop::Verdict::kBetter)
    best_ = current_;
  if (pending_) Judge(judged, measured, ms);
  // The plan refit on this window (a change's, kept or not) is the next
  // one considered: the window measured what the plan before it guessed.
  if (!final) Propose(refitted.plan, refitted.trace_end_ns, ms);
}

// The run's trace since the last change -> profile -> plan; nullopt while
// too few snapshots came since. current_ is read without the lock: only
// this (the driver's) thread writes it.
StatusOr<std::optional<AutotuneController::Refitted>> AutotuneController::Solve() {
  PIPETUNE_ASSIGN_OR_RETURN(analyzer::CollectedTrace trace, trace_.Read());
  if (last_change_ns_ > 0) {
    auto first = std::find_if(trace.frames.begin(), trace.frames.end(), [&](const analyzer::Frame& f) {
      return f.time_ns >= last_change_ns_ + kSettleNs;
    });
    trace.frames.erase(trace.frames.begin(), first);
  }
  if (trace.frames.size() < kMinFrames) return std::optional<Refitted>();
  Refitted out;
  out.trace_end_ns = trace.frames.back().time_ns;
  PIPETUNE_ASSIGN_OR_RETURN(analyzer::ProfiledRun run, analyzer::ProfileCollected(trace));
  out.rate_error = RateRelativeError(trace, run.window.begin_frame, run.window.end_frame);
  tuner::TuneInput input;
  input.profile = std::move(run.profile);
  input.config = current_;  // the knobs running now
  tuner::BudgetFlags budgets = options_.budgets;
  budgets.no_cache = true;  // a cache cannot be added to a running pipeline
  tuner::HostLimits host{trace.header.host.UsableCores(), trace.header.host.UsableMemoryBytes()};
  PIPETUNE_ASSIGN_OR_RETURN(tuner::Resources resources, tuner::ResolveResources(input, host, budgets));
  PIPETUNE_ASSIGN_OR_RETURN(out.plan, tuner::Solve(input, resources, tuner::Objective::kMax));
  return std::optional<Refitted>(std::move(out));
}

// The change the window ran, judged by the rules: kept when it beat the
// original knobs beyond the windows' noise and the best measured, else
// rolled back (the knobs go back to the best when the loop settles, or on
// to the next plan).
void AutotuneController::Judge(const RetuneLoop::Judged& judged, double measured, double refit_ms) {
  AutotuneDecision decision = *pending_;
  pending_.reset();
  decision.measured = measured;
  decision.refit_ms = refit_ms;
  decision.seconds = now_seconds_;
  if (judged.verdict == RetuneLoop::Verdict::kBetter) {
    decision.kind = AutotuneDecision::Kind::kKept;
  } else {
    decision.kind = AutotuneDecision::Kind::kRolledBack;
    decision.note = judged.WhyNotKept(measured);
  }
  Record(std::move(decision));
}

void AutotuneController::Propose(const tuner::Plan& plan, uint64_t trace_end_ns, double refit_ms) {
  models::PipelineConfig planned = current_;
  for (const tuner::PlannedStage& stage : plan.stages) {
    if (stage.inserted()) {
      NoteOnce(fmt::format("the plan would insert a {} stage \"{}\", which needs a restart (pipetune tune)",
                           stage.op_name, stage.name));
      continue;
    }
    std::optional<size_t> index = planned.FindStage(stage.name);
    if (!index) continue;
    models::StageConfig& knobs = planned.stages[*index];
    if (models::OpIsParallel(knobs.op)) knobs.parallelism = stage.parallelism;
    if (knobs.op == models::Op::kPrefetch && stage.buffer) knobs.buffer = *stage.buffer;
  }
  AutotuneDecision decision;
  decision.seconds = now_seconds_;
  decision.measured_before = plan.measured_throughput;
  decision.predicted = plan.predicted_throughput;
  decision.refit_ms = refit_ms;
  RetuneLoop::Next next =
      loop_.Consider(WorkersOf(planned), plan.predicted_throughput, plan.predicted_throughput_before);
  if (next.action == RetuneLoop::Action::kTry) {
    decision.kind = AutotuneDecision::Kind::kChange;
    decision.moves = MovesBetween(current_, planned);
    Apply(decision.moves);
    last_change_ns_ = trace_end_ns;
    pending_ = decision;
    Record(std::move(decision));
    return;
  }
  decision.note = next.reason;
  SettleOnBest(std::move(decision), WorkersOf(planned) == loop_.best() ? &planned : nullptr);
}

// Settled: the best measured knobs run from now on. When the plan has their
// workers, its prefetch buffers too: the queue model sized them for those
// workers, and a buffer moves no bound, so it needs no judging.
void AutotuneController::SettleOnBest(AutotuneDecision decision, const models::PipelineConfig* plan_knobs) {
  if (loop_.best() == WorkersOf(current_)) best_ = current_;  // the running knobs won a tie
  models::PipelineConfig target = best_;
  if (plan_knobs != nullptr) {
    for (models::StageConfig& stage : target.stages) {
      std::optional<size_t> index = plan_knobs->FindStage(stage.name);
      if (index && stage.op == models::Op::kPrefetch) stage.buffer = plan_knobs->stages[*index].buffer;
    }
  }
  decision.kind = AutotuneDecision::Kind::kSettled;
  decision.moves = MovesBetween(current_, target);
  Apply(decision.moves);
  best_ = current_;
  settled_ = true;
  stats_.settled_at_seconds = now_seconds_;
  Record(std::move(decision));
}

void AutotuneController::Decline(const std::string& why, double refit_ms) {
  AutotuneDecision declined;
  declined.kind = AutotuneDecision::Kind::kDeclined;
  declined.seconds = now_seconds_;
  declined.refit_ms = refit_ms;
  declined.note = "the knobs stay as they are: " + why;
  Record(std::move(declined));
}

// Sets the knobs on the attached pipeline (when there is one) and in the
// config decided so far, and tells the trace the config it runs.
void AutotuneController::Apply(const std::vector<KnobMove>& moves) {
  if (moves.empty()) return;
  std::vector<std::string> failures;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const KnobMove& move : moves) {
      std::optional<size_t> index = current_.FindStage(move.stage);
      if (!index) continue;
      Status applied = SetKnob(pipeline_, current_.stages[*index], move);
      if (!applied.ok()) failures.push_back(applied.message());
    }
    if (pipeline_ != nullptr)
      tracer::SetPipelineInfo(current_.name, models::Serialize(current_), config_path_);
  }
  for (const std::string& failure : failures) NoteOnce(failure);
}

void AutotuneController::NoteOnce(const std::string& note) {
  if (std::find(notes_.begin(), notes_.end(), note) != notes_.end()) return;
  notes_.push_back(note);
  AutotuneDecision declined;
  declined.kind = AutotuneDecision::Kind::kDeclined;
  declined.seconds = now_seconds_;
  declined.note = note;
  Record(std::move(declined));
}

void AutotuneController::Record(AutotuneDecision decision) {
  if (options_.on_decision) options_.on_decision(decision);
  stats_.decisions.push_back(std::move(decision));
}

}  // namespace pipetune::workflow

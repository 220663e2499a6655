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

// The relative standard error of the window's mean output rate, from the
// consumer's steps per snapshot interval (0 with fewer than 3 intervals):
// how far the rate of a window this long moves by chance.
double RateRelativeError(const analyzer::CollectedTrace& trace, const analyzer::Window& window) {
  std::vector<double> counts;
  for (size_t f = window.begin_frame + 1; f <= window.end_frame && f < trace.frames.size(); ++f) {
    counts.push_back(static_cast<double>(trace.frames[f].steps - trace.frames[f - 1].steps));
  }
  if (counts.size() < 3) return 0;
  double n = static_cast<double>(counts.size());
  double mean = 0, squares = 0;
  for (double c : counts) mean += c / n;
  if (mean <= 0) return 0;
  for (double c : counts) squares += (c - mean) * (c - mean);
  return std::sqrt(squares / (n - 1)) / (mean * std::sqrt(n));
}

bool SameMoves(const std::vector<KnobMove>& a, const std::vector<KnobMove>& b) {
  return std::equal(a.begin(), a.end(), b.begin(), b.end(), [](const KnobMove& x, const KnobMove& y) {
    return x.stage == y.stage && x.knob == y.knob && x.new_value == y.new_value;
  });
}

// The consumer's own rate in the window: its steps over the time it spent in
// them (not waiting for an output); nullopt when it recorded none.
std::optional<double> ConsumerRate(const analyzer::CollectedTrace& trace, const analyzer::Window& window) {
  if (window.end_frame >= trace.frames.size() || window.begin_frame >= window.end_frame) return std::nullopt;
  const analyzer::Frame& begin = trace.frames[window.begin_frame];
  const analyzer::Frame& end = trace.frames[window.end_frame];
  if (end.steps <= begin.steps || end.step_busy_ns <= begin.step_busy_ns) return std::nullopt;
  return static_cast<double>(end.steps - begin.steps) * 1e9 /
         static_cast<double>(end.step_busy_ns - begin.step_busy_ns);
}

// What a plan can give the consumer: its prediction of the pipeline, but no
// more than the consumer's own rate (the plan's demand when the config states
// a step, else the one measured): a training loop whose step takes 4 ms
// drains no more than 250 outputs/s, so a plan predicted beyond that gains
// nothing that could be measured.
double Achievable(const tuner::Plan& plan, std::optional<double> consumer_rate) {
  std::optional<double> demand = plan.demand_throughput ? plan.demand_throughput : consumer_rate;
  return demand ? std::min(plan.predicted_throughput, *demand) : plan.predicted_throughput;
}

std::vector<KnobMove> Reversed(std::vector<KnobMove> moves) {
  for (KnobMove& move : moves) std::swap(move.old_value, move.new_value);
  return moves;
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
  if (!(options.tolerance >= 0 && options.tolerance < 1))
    return InvalidInput(fmt::format("the tolerance must be in [0, 1), got {}", options.tolerance));
  if (!(options.min_gain >= 0 && options.min_gain < 1))
    return InvalidInput(fmt::format("the minimum gain must be in [0, 1), got {}", options.min_gain));
  return Status::Ok();
}

AutotuneController::AutotuneController(AutotuneControllerOptions options, models::PipelineConfig config,
                                       std::string trace_path, std::string config_path)
    : options_(std::move(options)),
      config_path_(std::move(config_path)),
      current_(std::move(config)),
      trace_(std::move(trace_path)),
      next_refit_seconds_(options_.refit_every_seconds) {}

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
  if (!pending_) return;
  Refit(/*final=*/true);
  if (!pending_) return;
  AutotuneDecision undone = *pending_;
  undone.kind = AutotuneDecision::Kind::kRolledBack;
  undone.note = "the run ended before the change could be measured; the config keeps the knobs before it";
  Apply(Reversed(pending_->moves));
  pending_.reset();
  Record(std::move(undone));
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
  if (pending_) {
    Judge(refitted.plan.measured_throughput, refitted.rate_error, refitted.trace_end_ns, ms);
    return;  // the next refit reads the window after this decision
  }
  if (final) return;
  pending_error_ = refitted.rate_error;  // the "before" of a change made now
  Propose(refitted.plan, refitted.consumer_rate, refitted.trace_end_ns, ms);
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
  out.rate_error = RateRelativeError(trace, run.window);
  out.consumer_rate = ConsumerRate(trace, run.window);
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

// A change helped when the rate after it beats the rate before it by more
// than min_gain and by more than twice the two windows' combined standard
// error: on a loaded machine a 2 s window's rate moves by tens of percent,
// and a change kept on such a fluke leaves workers the cores cannot run.
void AutotuneController::Judge(double measured, double rate_error, uint64_t trace_end_ns, double refit_ms) {
  AutotuneDecision judged = *pending_;
  judged.measured = measured;
  judged.refit_ms = refit_ms;
  judged.seconds = now_seconds_;
  bool missed = measured < (1 - options_.tolerance) * judged.predicted;
  double noise = 2 * std::sqrt(pending_error_ * pending_error_ + rate_error * rate_error);
  bool helped = measured > judged.measured_before * (1 + std::max(options_.min_gain, noise));
  if (missed && !helped) {
    judged.kind = AutotuneDecision::Kind::kRolledBack;
    judged.note = fmt::format(
        "measured {:.3g}/s, below {:.0f}% of the predicted {:.3g}/s, and no gain beyond the windows' noise "
        "({:.0f}%)",
        measured, 100 * (1 - options_.tolerance), judged.predicted, 100 * std::max(options_.min_gain, noise));
    rejected_.push_back(pending_->moves);
    Apply(Reversed(pending_->moves));
    last_change_ns_ = trace_end_ns;  // the next refit measures the knobs restored
  } else {
    judged.kind = AutotuneDecision::Kind::kKept;
    kept_prediction_ = judged.predicted;
  }
  pending_.reset();
  Record(std::move(judged));
}

void AutotuneController::Propose(const tuner::Plan& plan, std::optional<double> consumer_rate,
                                 uint64_t trace_end_ns, double refit_ms) {
  std::vector<KnobMove> workers, buffers;
  for (const tuner::PlannedStage& planned : plan.stages) {
    if (planned.inserted()) {
      NoteOnce(fmt::format("the plan would insert a {} stage \"{}\", which needs a restart (pipetune tune)",
                           planned.op_name, planned.name));
      continue;
    }
    std::optional<size_t> index = current_.FindStage(planned.name);
    if (!index) continue;
    const models::StageConfig* stage = &current_.stages[*index];
    if (models::OpIsParallel(stage->op) && planned.parallelism != stage->parallelism) {
      workers.push_back({stage->name, tuner::Knob::kParallelism, stage->parallelism, planned.parallelism});
    } else if (stage->op == models::Op::kPrefetch && planned.buffer &&
               *planned.buffer != stage->buffer.value_or(1)) {
      buffers.push_back({stage->name, tuner::Knob::kBuffer, stage->buffer.value_or(1), *planned.buffer});
    }
  }
  AutotuneDecision decision;
  decision.seconds = now_seconds_;
  decision.measured_before = plan.measured_throughput;
  decision.predicted = Achievable(plan, consumer_rate);
  decision.refit_ms = refit_ms;
  // Worth it only when the plan predicts (up to the consumer's own rate:
  // Achievable) more than both the rate measured
  // and what the change already kept was predicted to give: a plan that
  // predicts no more than the running one only restates the gap between
  // model and measurement (a loaded machine stretches every worker's
  // latency, and Little's law then asks for ever more workers that the
  // cores cannot run).
  double baseline = std::max(plan.measured_throughput, kept_prediction_);
  bool worth = decision.predicted >= baseline * (1 + options_.min_gain);
  bool tried = std::any_of(rejected_.begin(), rejected_.end(),
                           [&](const std::vector<KnobMove>& r) { return SameMoves(r, workers); });
  if (!workers.empty() && worth && !tried) {
    decision.kind = AutotuneDecision::Kind::kChange;
    decision.moves = workers;
    decision.moves.insert(decision.moves.end(), buffers.begin(), buffers.end());
    Apply(decision.moves);
    last_change_ns_ = trace_end_ns;
    pending_ = decision;
    Record(std::move(decision));
    return;
  }
  // Settled. A buffer the queue model sizes differently costs no workers
  // and moves no bound, so it is applied without being judged.
  if (!buffers.empty()) {
    AutotuneDecision buffer = decision;
    buffer.moves = buffers;
    Apply(buffers);
    Record(std::move(buffer));
  }
  decision.kind = AutotuneDecision::Kind::kSettled;
  decision.note = workers.empty() ? "the plan keeps every stage's workers"
                  : tried
                      ? "the plan is one that was rolled back"
                      : fmt::format("the plan predicts less than {:.0f}% over {}", 100 * options_.min_gain,
                                    kept_prediction_ > plan.measured_throughput
                                        ? "the prediction of the change kept before it"
                                        : "the measured rate");
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

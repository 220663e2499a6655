#include "pipetune/workflow/autotune.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <mutex>

#include "pipetune/analyzer/collector.h"
#include "pipetune/analyzer/diagnosis.h"
#include "pipetune/tracer/tracer.h"
#include "pipetune/tuner/solver.h"
#include "pipetune/workflow/run.h"

namespace pipetune::workflow {
namespace {

// After a change, the refit skips this much of the trace: the queues refill
// and the workers above a smaller count leave within it.
constexpr uint64_t kSettleNs = 300'000'000;
// A refit needs this many snapshots (100 ms apart) since the last change.
constexpr size_t kMinFrames = 5;
// How often the monitor thread looks whether a refit is due.
constexpr double kTickSeconds = 0.25;
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

// Drives one run: called on the run's monitor thread every tick, it refits
// when one is due and applies or judges the plan. The run's consumer never
// waits for it.
class Controller {
 public:
  Controller(const AutotuneRequest& request, models::PipelineConfig config, std::string trace_path)
      : request_(request),
        current_(std::move(config)),
        trace_path_(std::move(trace_path)),
        next_refit_seconds_(request.refit_every_seconds) {}

  void Attach(runtime::Pipeline& pipeline) { pipeline_ = &pipeline; }

  void Tick(const runtime::Progress& progress) {
    now_seconds_ = progress.seconds;
    if (settled_ || progress.seconds < next_refit_seconds_) return;
    next_refit_seconds_ = progress.seconds + request_.refit_every_seconds;
    Refit(/*final=*/false);
  }

  // After the run: a change still waiting is judged on what the trace holds
  // since it; one that cannot be judged is left out of the settled config.
  void Finish() {
    pipeline_ = nullptr;
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

  AutotuneResult TakeResult() {
    result_.settled_at_seconds = settled_at_;
    result_.refit_ms_mean = result_.refits > 0 ? refit_ms_total_ / result_.refits : 0;
    return std::move(result_);
  }
  const models::PipelineConfig& current() const { return current_; }

 private:
  struct Refitted {
    tuner::Plan plan;
    uint64_t trace_end_ns = 0;
    double rate_error = 0;  // RateRelativeError of the window measured
  };

  void Refit(bool final) {
    auto begin = std::chrono::steady_clock::now();
    StatusOr<std::optional<Refitted>> solved = Solve();
    double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - begin).count();
    if (!solved.ok()) {
      Decline(solved.status().message(), ms);
      return;
    }
    if (!*solved) return;  // too few snapshots since the last change yet
    const std::optional<Refitted>& refitted = *solved;
    ++result_.refits;
    refit_ms_total_ += ms;
    result_.refit_ms_max = std::max(result_.refit_ms_max, ms);
    const tuner::Plan& plan = refitted->plan;
    if (pending_) {
      Judge(plan.measured_throughput, refitted->rate_error, refitted->trace_end_ns, ms);
      return;  // the next refit reads the window after this decision
    }
    if (final) return;
    pending_error_ = refitted->rate_error;  // the "before" of a change made now
    Propose(plan, refitted->trace_end_ns, ms);
  }

  // The run's trace since the last change -> profile -> plan; nullopt while
  // too few snapshots came since.
  StatusOr<std::optional<Refitted>> Solve() {
    PIPETUNE_ASSIGN_OR_RETURN(analyzer::CollectedTrace trace, analyzer::CollectTrace(trace_path_));
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
    tuner::TuneInput input;
    input.profile = std::move(run.profile);
    input.config = current_;  // the knobs running now
    tuner::BudgetFlags budgets = request_.budgets;
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
  void Judge(double measured, double rate_error, uint64_t trace_end_ns, double refit_ms) {
    AutotuneDecision judged = *pending_;
    judged.measured = measured;
    judged.refit_ms = refit_ms;
    judged.seconds = now_seconds_;
    bool missed = measured < (1 - request_.tolerance) * judged.predicted;
    double noise = 2 * std::sqrt(pending_error_ * pending_error_ + rate_error * rate_error);
    bool helped = measured > judged.measured_before * (1 + std::max(request_.min_gain, noise));
    if (missed && !helped) {
      judged.kind = AutotuneDecision::Kind::kRolledBack;
      judged.note = fmt::format(
          "measured {:.3g}/s, below {:.0f}% of the predicted {:.3g}/s, and no gain beyond the windows' noise "
          "({:.0f}%)",
          measured, 100 * (1 - request_.tolerance), judged.predicted,
          100 * std::max(request_.min_gain, noise));
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

  void Propose(const tuner::Plan& plan, uint64_t trace_end_ns, double refit_ms) {
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
    decision.predicted = plan.predicted_throughput;
    decision.refit_ms = refit_ms;
    // Worth it only when the plan predicts more than both the rate measured
    // and what the change already kept was predicted to give: a plan that
    // predicts no more than the running one only restates the gap between
    // model and measurement (a loaded machine stretches every worker's
    // latency, and Little's law then asks for ever more workers that the
    // cores cannot run).
    double baseline = std::max(plan.measured_throughput, kept_prediction_);
    bool worth = plan.predicted_throughput >= baseline * (1 + request_.min_gain);
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
                        : fmt::format("the plan predicts less than {:.0f}% over {}", 100 * request_.min_gain,
                                      kept_prediction_ > plan.measured_throughput
                                          ? "the prediction of the change kept before it"
                                          : "the measured rate");
    settled_ = true;
    settled_at_ = now_seconds_;
    Record(std::move(decision));
  }

  void Decline(const std::string& why, double refit_ms) {
    AutotuneDecision declined;
    declined.kind = AutotuneDecision::Kind::kDeclined;
    declined.seconds = now_seconds_;
    declined.refit_ms = refit_ms;
    declined.note = "the knobs stay as they are: " + why;
    Record(std::move(declined));
  }

  static std::vector<KnobMove> Reversed(std::vector<KnobMove> moves) {
    for (KnobMove& move : moves) std::swap(move.old_value, move.new_value);
    return moves;
  }

  // Sets the knobs on the running pipeline (when there is one) and in the
  // config that will be written, and tells the trace the config it runs.
  void Apply(const std::vector<KnobMove>& moves) {
    for (const KnobMove& move : moves) {
      std::optional<size_t> index = current_.FindStage(move.stage);
      if (!index) continue;
      models::StageConfig* stage = &current_.stages[*index];
      Status applied = Status::Ok();
      if (move.knob == tuner::Knob::kBuffer) {
        if (pipeline_ != nullptr) applied = pipeline_->SetBuffer(move.stage, move.new_value);
        if (applied.ok()) stage->buffer = move.new_value;
      } else {
        if (pipeline_ != nullptr)
          applied = pipeline_->SetParallelism(move.stage, static_cast<int>(move.new_value));
        if (applied.ok()) stage->parallelism = static_cast<int>(move.new_value);
      }
      if (!applied.ok()) NoteOnce(applied.message());
    }
    if (pipeline_ != nullptr)
      tracer::SetPipelineInfo(current_.name, models::Serialize(current_), request_.config_path);
  }

  void NoteOnce(const std::string& note) {
    if (std::find(notes_.begin(), notes_.end(), note) != notes_.end()) return;
    notes_.push_back(note);
    AutotuneDecision declined;
    declined.kind = AutotuneDecision::Kind::kDeclined;
    declined.seconds = now_seconds_;
    declined.note = note;
    Record(std::move(declined));
  }

  void Record(AutotuneDecision decision) {
    if (request_.on_decision) request_.on_decision(decision);
    result_.decisions.push_back(std::move(decision));
  }

  const AutotuneRequest& request_;
  models::PipelineConfig current_;
  const std::string trace_path_;
  runtime::Pipeline* pipeline_ = nullptr;
  double now_seconds_ = 0;
  double next_refit_seconds_;                // the first after one interval: a window to measure
  uint64_t last_change_ns_ = 0;              // trace time of the last frame read before the last change
  std::optional<AutotuneDecision> pending_;  // applied, not yet judged
  double kept_prediction_ = 0;               // the last kept change's prediction
  double pending_error_ = 0;                 // RateRelativeError of the window before the pending change
  std::vector<std::vector<KnobMove>> rejected_;
  std::vector<std::string> notes_;
  bool settled_ = false;
  std::optional<double> settled_at_;
  double refit_ms_total_ = 0;
  AutotuneResult result_;
};

std::string DefaultOutput(const std::string& config_path) {
  std::string tuned = TunedConfigPath("", config_path, "");
  // STEM.tuned.json -> STEM.autotuned.json: `tune`'s output is not overwritten.
  return tuned.substr(0, tuned.size() - std::string("tuned.json").size()) + "autotuned.json";
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

StatusOr<AutotuneResult> Autotune(const AutotuneRequest& request) {
  if (!(request.seconds > 0))
    return InvalidInput(fmt::format("--seconds: must be > 0, got {}", request.seconds));
  if (!(request.refit_every_seconds > 0)) return InvalidInput("the refit interval must be > 0");
  PIPETUNE_ASSIGN_OR_RETURN(models::PipelineConfig config, models::LoadConfig(request.config_path));
  std::string output = request.output.empty() ? DefaultOutput(request.config_path) : request.output;
  std::string trace_path = request.trace_path.empty() ? output + ".ptrace" : request.trace_path;

  Controller controller(request, config, trace_path);
  std::mutex mu;  // Tick (monitor thread) against Attach and Finish
  RunConfigOptions run;
  run.seconds = request.seconds;
  run.trace_path = trace_path;
  run.config_path = request.config_path;
  run.registry = request.registry;
  run.interrupt = request.interrupt;
  run.progress_interval_s = kTickSeconds;
  run.resizable_workers = request.budgets.max_threads.value_or(kDefaultResizableWorkers);
  run.on_start = [&](runtime::Pipeline& pipeline) {
    std::lock_guard<std::mutex> lock(mu);
    controller.Attach(pipeline);
  };
  run.on_progress = [&](const runtime::Progress& progress) {
    std::lock_guard<std::mutex> lock(mu);
    controller.Tick(progress);
  };
  PIPETUNE_ASSIGN_OR_RETURN(runtime::RunSummary summary, RunConfig(config, run));
  std::lock_guard<std::mutex> lock(mu);
  controller.Finish();
  PIPETUNE_ASSIGN_OR_RETURN(TunedConfig written,
                            WriteTunedConfig(config, controller.current(), DirectoryOf(request.config_path),
                                             request.config_path, output, /*with_diff=*/true));
  AutotuneResult result = controller.TakeResult();
  result.summary = std::move(summary);
  result.written = std::move(written);
  result.trace_path = trace_path;
  return result;
}

}  // namespace pipetune::workflow

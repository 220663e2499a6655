#include "pipetune/workflow/autotune_epochs.h"

#include <fmt/format.h>

#include <algorithm>
#include <utility>
#include <vector>

#include "pipetune/analyzer/collector.h"
#include "pipetune/analyzer/dataloader_trace.h"
#include "pipetune/base/files.h"
#include "pipetune/workflow/dataloader_kwargs.h"
#include "pipetune/workflow/tune.h"

namespace pipetune::workflow {
namespace {

// The DataLoader's knobs a plan sets, in the order they are printed.
constexpr const char* kTunable[] = {"num_workers", "prefetch_factor", "persistent_workers", "pin_memory",
                                    "fetch_threads"};

// As the script would write it: None, True, False, 2.
std::string ValueText(const Json& value) {
  if (value.is_null()) return "None";
  if (value.is_boolean()) return value.get<bool>() ? "True" : "False";
  return DumpJson(value);
}

std::string KnobsText(const Json& kwargs) {
  std::vector<std::string> parts;
  for (const char* key : kTunable) {
    if (kwargs.contains(key)) parts.push_back(fmt::format("{}={}", key, ValueText(kwargs[key])));
  }
  return fmt::format("{}", fmt::join(parts, ", "));
}

std::string DescribeChange(const Json& from, const Json& to) {
  std::vector<std::string> parts;
  for (const char* key : kTunable) {
    Json a = from.value(key, Json()), b = to.value(key, Json());
    if (a != b) parts.push_back(fmt::format("{} {} -> {}", key, ValueText(a), ValueText(b)));
  }
  if (from.value("ranks", Json()) != to.value("ranks", Json())) parts.push_back("the ranks' own settings");
  return parts.empty() ? "no change" : fmt::format("{}", fmt::join(parts, ", "));
}

// The spread of a segment's rate: the largest relative standard error of
// its processes' (a job's ranks') steps per snapshot, from each one's first
// step to its last (the iterator's start before them and the workers' end
// after them are in the rate, but they are no samples of its spread). 0
// when no trace can be read for it.
double SegmentRateError(const std::string& segment) {
  double error = 0;
  for (const std::string& path : analyzer::JobTracePaths(segment)) {
    StatusOr<analyzer::CollectedTrace> trace = analyzer::CollectTrace(path);
    if (!trace.ok() || trace->frames.empty()) continue;
    const std::vector<analyzer::Frame>& frames = trace->frames;
    size_t first = 0, last = frames.size() - 1;
    while (first < last && frames[first].steps == 0) ++first;
    while (last > first && frames[last - 1].steps == frames[last].steps) --last;
    error = std::max(error, RateRelativeError(*trace, first, last));
  }
  return error;
}

}  // namespace

Json NormalizedKwargs(const Json& kwargs) {
  Json out = Json::object();
  int workers = kwargs.value("num_workers", 0);
  out["num_workers"] = workers;
  out["prefetch_factor"] = workers > 0 ? kwargs.value("prefetch_factor", Json()) : Json();
  out["persistent_workers"] = workers > 0 && kwargs.value("persistent_workers", false);
  out["pin_memory"] = kwargs.value("pin_memory", false);
  // Named only where the dataset is map-style (a stream's profile has no such knob).
  if (kwargs.contains("fetch_threads")) out["fetch_threads"] = kwargs["fetch_threads"];
  if (kwargs.contains("ranks") && !kwargs["ranks"].is_null()) out["ranks"] = kwargs["ranks"];
  return out;
}

EpochDecider::EpochDecider(EpochDeciderOptions options)
    : options_(std::move(options)), loop_(options_.rules) {}

Json EpochDecider::Decide(const Json& request) {
  const int epoch = request.value("epoch", 0);
  if (!request.contains("segment") || !request["segment"].is_string())
    return Stopped(epoch, "the request names no segment trace");
  const std::string segment = request["segment"].get<std::string>();
  if (!running_) {
    if (!request.contains("knobs") || !request["knobs"].is_object())
      return Stopped(epoch, "the first request holds no knobs");
    running_ = NormalizedKwargs(request["knobs"]);
  }
  if (stopped_ || loop_.settled())
    return {{"apply", nullptr}, {"state", "settled"}, {"lines", Json::array()}};

  TuneRequest tune;
  tune.traces = {segment};
  tune.budgets = options_.budgets;
  tune.output = DataLoaderKwargsPath("", segment);
  StatusOr<TuneResult> tuned = Tune(tune);
  if (!tuned.ok()) return Stopped(epoch, tuned.status().message());
  if (!tuned->dataloader) return Stopped(epoch, segment + " is no DataLoader's trace");
  const tuner::Plan& plan = tuned->plan;

  Json lines = Json::array();
  const std::string ran = DumpJson(*running_);
  const bool judging = loop_.pending().has_value();
  RetuneLoop::Judged judged = loop_.Measured(ran, {plan.measured_throughput, SegmentRateError(segment),
                                                   static_cast<double>(running_->value("num_workers", 0))});
  if (judged.verdict == RetuneLoop::Verdict::kFirst || judged.verdict == RetuneLoop::Verdict::kBetter)
    best_ = *running_;
  if (judging) {
    bool kept = judged.verdict == RetuneLoop::Verdict::kBetter;
    lines.push_back(fmt::format(
        "epoch {}: {}: predicted {:.1f} batches/s, measured {:.1f} (before: {:.1f}): {}", epoch - 1,
        DescribeChange(pending_from_, *running_), pending_prediction_, plan.measured_throughput,
        judged.best_rate_before,
        kept ? (judged.cheaper_tie ? "kept (within the noise of the best, on fewer workers)" : "kept")
             : fmt::format("rolled back ({})", judged.WhyNotKept(plan.measured_throughput))));
  }

  // The plan refit on this segment, kept or not: it measured what the plan
  // before it had to guess (the workers' start-up and CPU).
  Json planned = NormalizedKwargs(tuned->dataloader->kwargs);
  RetuneLoop::Next next =
      loop_.Consider(DumpJson(planned), plan.predicted_throughput, plan.predicted_throughput_before);
  if (next.action == RetuneLoop::Action::kTry) {
    lines.push_back(
        fmt::format("epoch {}: {}: predicted {:.1f} batches/s (measured {:.1f} at {})", epoch,
                    DescribeChange(*running_, planned), plan.predicted_throughput, loop_.best_rate(),
                    DumpJson(best_) == ran ? "the current settings" : "the best settings so far"));
    pending_prediction_ = plan.predicted_throughput;
    pending_from_ = *running_;
    running_ = planned;
    return {{"apply", planned}, {"state", "exploring"}, {"lines", std::move(lines)}};
  }
  Json apply = nullptr;
  if (loop_.best() == ran) best_ = *running_;  // the running settings won a tie
  if (DumpJson(best_) == ran) {
    lines.push_back(fmt::format("epoch {}: settled at {}: {:.1f} batches/s measured ({})", epoch,
                                KnobsText(best_), loop_.best_rate(), next.reason));
  } else {
    lines.push_back(fmt::format("epoch {}: {} (back to the best measured, {:.1f} batches/s); settled ({})",
                                epoch, DescribeChange(*running_, best_), loop_.best_rate(), next.reason));
    apply = best_;
    running_ = best_;
  }
  Write(best_, lines);
  return {{"apply", std::move(apply)}, {"state", "settled"}, {"lines", std::move(lines)}};
}

Json EpochDecider::Finish() {
  if (written_ || !running_) return Json::array();
  // A change still waiting was never measured: the best measured is written.
  Json lines = Json::array();
  Write(loop_.has_best() ? best_ : *running_, lines);
  return lines;
}

Json EpochDecider::Stopped(int epoch, const std::string& why) {
  stopped_ = true;
  loop_.Settle();
  std::string knobs = running_ ? KnobsText(*running_) : "its settings";
  Json lines =
      Json::array({fmt::format("epoch {}: no decision ({}): the job goes on with {}", epoch, why, knobs)});
  // What runs now is written: the job keeps it to its end.
  if (running_) Write(*running_, lines);
  return {{"apply", nullptr}, {"state", "stopped"}, {"lines", std::move(lines)}};
}

void EpochDecider::Write(const Json& kwargs, Json& lines) {
  if (options_.output.empty()) return;
  Status saved = WriteFileAtomically(options_.output, DumpJson(kwargs, 2) + "\n");
  written_ = saved.ok();
  if (!saved.ok()) lines.push_back(fmt::format("the settled settings were not written: {}", saved.message()));
}

}  // namespace pipetune::workflow

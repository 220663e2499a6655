#include "pipetune/workflow/retune_loop.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <vector>

namespace pipetune::workflow {
namespace {

// A gain counts when it is over this many of the windows' combined standard
// errors: about a 2.5% chance that a setting no better wins on a fluke.
constexpr double kNoiseSigmas = 2;

}  // namespace

double RateRelativeError(const analyzer::CollectedTrace& trace, size_t begin_frame, size_t end_frame) {
  std::vector<double> counts;
  for (size_t f = begin_frame + 1; f <= end_frame && f < trace.frames.size(); ++f) {
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

RetuneLoop::Judged RetuneLoop::Measured(const std::string& setting, MeasuredWindow window) {
  measured_[setting] = window.rate;
  Judged judged;
  if (!best_) {
    best_ = Best{setting, window};
    pending_.reset();
    return judged;
  }
  judged.best_rate_before = best_->window.rate;
  if (setting == best_->setting) {
    // The same knobs again (the driver came back to them): the newer window
    // is what the next change must beat, as the machine's load moves.
    best_->window = window;
    judged.verdict = Verdict::kAgain;
    return judged;
  }
  pending_.reset();
  double spread = std::hypot(best_->window.rate_error, window.rate_error);
  judged.margin = std::max(rules_.min_gain, kNoiseSigmas * spread);
  if (window.rate > best_->window.rate * (1 + judged.margin)) {
    best_ = Best{setting, window};
    judged.verdict = Verdict::kBetter;
  } else {
    judged.verdict = Verdict::kNotBetter;
  }
  return judged;
}

RetuneLoop::Next RetuneLoop::Consider(const std::string& setting, double predicted) {
  Next next;
  if (!best_ || settled_) {
    next.reason = settled_ ? "settled already" : "nothing measured yet";
    settled_ = settled_ || !best_;
    return next;
  }
  // A prediction has no spread of its own to beat, and trying costs one
  // window (the tries are capped; the change is kept only if its window
  // beats the noise): min_gain alone. A noise bar here, where a window
  // moves by 30% (an epoch on a loaded host), kept the first plan's
  // overshoot (9 workers from a run without any) from ever being corrected.
  next.margin = rules_.min_gain;
  auto tried = measured_.find(setting);
  if (setting == best_->setting) {
    next.reason = "the model's plan is the best measured setting";
  } else if (tried != measured_.end()) {
    next.reason = fmt::format("the model's plan was measured already, at {:.4g}/s", tried->second);
  } else if (tries_ >= rules_.max_tries) {
    next.reason = fmt::format("{} changes tried, the most the rules allow", tries_);
  } else if (!(predicted > best_->window.rate * (1 + next.margin))) {
    next.reason = fmt::format("the model's plan predicts {:.4g}/s, not {:.0f}% over the best measured {:.4g}/s",
                              predicted, 100 * next.margin, best_->window.rate);
  } else {
    next.action = Action::kTry;
    pending_ = setting;
    ++tries_;
    return next;
  }
  settled_ = true;
  return next;
}

}  // namespace pipetune::workflow

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
// Blocks a window's snapshots are grouped into, at least, to measure its
// rate's spread (RateRelativeError); windows of fewer snapshots use one per
// block.
constexpr size_t kMinBlocks = 5;

}  // namespace

double RateRelativeError(const analyzer::CollectedTrace& trace, size_t begin_frame, size_t end_frame) {
  std::vector<double> counts;
  for (size_t f = begin_frame + 1; f <= end_frame && f < trace.frames.size(); ++f) {
    counts.push_back(static_cast<double>(trace.frames[f].steps - trace.frames[f - 1].steps));
  }
  if (counts.size() < 3) return 0;
  // Batch means: the snapshots grouped into blocks as coarse as leaves
  // kMinBlocks of them. A pool of workers delivers in bursts (a burst of
  // prefetched batches, then a gap, within a few snapshots), which per
  // snapshot looks like a spread of the rate and is none: within a block it
  // averages out, while a drift of the machine's load still shows between
  // blocks. Per snapshot, an epoch of a DataLoader with 7 workers measured
  // 25% error, and a real 44% gain was taken for noise.
  const size_t block = std::max<size_t>(1, counts.size() / kMinBlocks);
  std::vector<double> sums;
  for (size_t i = 0; i + block <= counts.size(); i += block) {
    double sum = 0;
    for (size_t j = i; j < i + block; ++j) sum += counts[j];
    sums.push_back(sum);
  }
  double n = static_cast<double>(sums.size());
  double mean = 0, squares = 0;
  for (double c : sums) mean += c / n;
  if (mean <= 0) return 0;
  for (double c : sums) squares += (c - mean) * (c - mean);
  return std::sqrt(squares / (n - 1)) / (mean * std::sqrt(n));
}

RetuneLoop::Judged RetuneLoop::Measured(const std::string& setting, MeasuredWindow window) {
  measured_[setting] = window.rate;
  Judged judged;
  if (!original_) {
    original_ = Best{setting, window};
    best_ = original_;
    pending_.reset();
    return judged;
  }
  judged.best_rate_before = best_->window.rate;
  judged.original_rate = original_->window.rate;
  if (setting == original_->setting) original_->window = window;
  if (setting == best_->setting) {
    // The same knobs again (the driver came back to them): the newer window
    // is what the next change must beat, as the machine's load moves.
    best_->window = window;
    judged.verdict = Verdict::kAgain;
    return judged;
  }
  pending_.reset();
  // The noise is judged against the original setting, the one the user
  // chose: leaving it must be worth it beyond the windows' spread. Between
  // two settings that both did, neither is the user's, so the one measured
  // higher is the better guess. Judged against the best instead, a
  // correction of the first plan (a DataLoader's 9-10 workers, planned from
  // an epoch without any, then 5 from the refit on those 9) needed to beat
  // an epoch's noise on top of a gain already proven, and lost (+31%
  // against a 58% bar), so the overshoot stayed.
  double spread = std::hypot(original_->window.rate_error, window.rate_error);
  judged.margin = std::max(rules_.min_gain, kNoiseSigmas * spread);
  judged.beat_original =
      setting != original_->setting && window.rate > original_->window.rate * (1 + judged.margin);
  if (!judged.beat_original) {
    judged.verdict = Verdict::kNotBetter;
    return judged;
  }
  // Of the settings that beat the original, the highest measured wins; one
  // the windows cannot tell from the highest wins when it is cheaper (fewer
  // workers or threads). Without that, a loaded 2-core host kept the first
  // plan's 8 workers over the 4 and 3 the refits planned (28.5, 27.1 and
  // 27.4 batches/s in one burst of load), which the grid then measured at
  // 35 against 79 batches/s for 4.
  const Best& top = top_ ? *top_ : *best_;
  bool higher = window.rate > top.window.rate * (1 + rules_.min_gain);
  double tie = std::max(rules_.min_gain, kNoiseSigmas * std::hypot(top.window.rate_error, window.rate_error));
  judged.cheaper_tie =
      !higher && window.cost < best_->window.cost && window.rate >= top.window.rate * (1 - tie);
  if (window.rate > top.window.rate) top_ = Best{setting, window};
  if (higher || judged.cheaper_tie) {
    best_ = Best{setting, window};
    judged.verdict = Verdict::kBetter;
  } else {
    judged.verdict = Verdict::kNotBetter;
  }
  return judged;
}

std::string RetuneLoop::Judged::WhyNotKept(double measured) const {
  if (!beat_original) {
    return fmt::format(
        "measured {:.4g}/s, not {:.0f}% (the windows' noise, at least the minimum gain) over the first "
        "setting's {:.4g}/s",
        measured, 100 * margin, original_rate);
  }
  return fmt::format(
      "measured {:.4g}/s, beyond the noise over the first setting's {:.4g}/s but not over the best "
      "measured {:.4g}/s",
      measured, original_rate, best_rate_before);
}

RetuneLoop::Next RetuneLoop::Consider(const std::string& setting, double predicted,
                                      double predicted_running) {
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
    next.reason =
        fmt::format("the model's plan predicts {:.4g}/s, not {:.0f}% over the best measured {:.4g}/s",
                    predicted, 100 * next.margin, best_->window.rate);
  } else if (!(predicted >= predicted_running * (1 + next.margin))) {
    next.reason = fmt::format(
        "the model's plan predicts {:.4g}/s, not {:.0f}% over its {:.4g}/s for the setting running: no gain, "
        "only the "
        "gap between model and measurement",
        predicted, 100 * next.margin, predicted_running);
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

// The retuning rules, written once (docs/tuner.md, "The retuning rules"):
// what every driver of live retuning decides with, whether it retunes the
// engine every few seconds (`pipetune autotune CONFIG`, pipetune.Loader's
// autotune=True: workflow/autotune_controller.h) or a PyTorch DataLoader
// between epochs (`pipetune autotune -- python3 train.py`:
// workflow/autotune_epochs.h). A driver measures windows, refits the model
// on each and hands both here; the loop says what to run next.
//
//   RetuneLoop loop(rules);
//   loop.Measured(setting, window);            // each window, of the setting it ran
//   RetuneLoop::Next next = loop.Consider(plan_setting, predicted);
//   next.action == kTry: run plan_setting; kSettle: run loop.best() from now on
//
// The rules:
//  - a change must beat noise: the first setting measured is the original
//    (the user's); a setting tried is kept only when its window's rate
//    beats the original's by more than the two windows' own spread (twice
//    their combined relative standard error), and by at least min_gain; a
//    plan is tried only when it predicts at least min_gain over the best
//    measured rate, and over what the same model predicts for the setting
//    running (else its gain is only the gap between model and measurement);
//  - a cap on tries: after max_tries changes the loop settles;
//  - settle on the best measured setting: of the original and the changes
//    that beat it, the one measured highest (by at least min_gain), or one
//    within the noise of the highest that costs less (fewer workers or
//    threads: MeasuredWindow::cost). Whatever ends the exploring
//    (the plan is the best setting, or was measured already, or gains too
//    little, or the cap), the setting kept is the best measured, never a
//    prediction, and a setting is never tried twice. The noise is judged
//    against the original only: between two changes that both beat it,
//    neither is the user's, and the one measured higher is the better
//    guess. Judged against the best, the correction of a DataLoader's
//    first plan (9-10 workers planned from an epoch without any, then 5
//    from the refit on those 9: +31% within a 58% bar on a loaded host)
//    was rolled back and the overshoot stayed.
// A setting is the driver's name for a set of knobs (equal names, equal
// knobs); the loop never reads it. Pure: no I/O, no clock, one thread.
#pragma once

#include <cstddef>
#include <map>
#include <optional>
#include <string>

#include "pipetune/analyzer/collector.h"

namespace pipetune::workflow {

struct RetuneRules {
  // No change is tried or kept for less than this relative gain, however
  // quiet the windows: below it a gain is not worth a worker.
  double min_gain = 0.03;
  // Changes tried before the loop settles.
  int max_tries = 3;
};

// A window's measured rate (outputs/s; batches/s for a DataLoader) and its
// relative standard error, from the window's own spread (the consumer's
// outputs per snapshot: RateRelativeError); 0 when too short to tell.
struct MeasuredWindow {
  double rate = 0;
  double rate_error = 0;
  // What the setting costs to run (a DataLoader's workers, the engine's
  // threads): of two settings the windows cannot tell apart, the cheaper is
  // kept. Equal costs (0 if the driver gives none) never break a tie.
  double cost = 0;
};

// The relative standard error of the mean output rate over frames
// [begin_frame, end_frame] of a trace, from the consumer's steps per block
// of snapshot intervals (batch means: at least 5 blocks, one interval each
// in a short window): how far the rate of a window this long moves by
// chance on this machine now. 0 with fewer than 3 intervals or no steps.
double RateRelativeError(const analyzer::CollectedTrace& trace, size_t begin_frame, size_t end_frame);

class RetuneLoop {
 public:
  explicit RetuneLoop(RetuneRules rules) : rules_(rules) {}

  enum class Verdict {
    kFirst,      // the first window: the setting is the best so far
    kBetter,     // the change tried beat the original beyond the noise, and the best: it is the best now
    kNotBetter,  // it did not: the best stays (the driver need not restore it yet)
    kAgain,      // the best setting measured again: its window replaces the old one
  };
  struct Judged {
    Verdict verdict = Verdict::kFirst;
    double best_rate_before = 0;  // the best's rate before this window
    double original_rate = 0;     // the original setting's rate it was judged against
    double margin = 0;            // the relative gain over the original it had to beat
    bool beat_original = false;   // it did, beyond the noise
    bool cheaper_tie = false;     // kBetter within the noise of the highest, on fewer resources
    // kNotBetter: why, in a user's words, for a window measured at `measured`.
    std::string WhyNotKept(double measured) const;
  };
  // A window of `setting`, which ran through it.
  Judged Measured(const std::string& setting, MeasuredWindow window);

  enum class Action { kTry, kSettle };
  struct Next {
    Action action = Action::kSettle;
    std::string reason;  // kSettle: why, in a user's words
    double margin = 0;   // the relative gain the prediction had to beat
  };
  // The model's plan, refit on the last window: `setting`, predicted to run
  // at `predicted`, where the same model predicts `predicted_running` for
  // the setting that ran the window. kTry: the driver runs it and measures
  // it next. kSettle: the loop is settled and the driver runs best() from
  // now on (it may be the setting running already).
  Next Consider(const std::string& setting, double predicted, double predicted_running);

  // Ends the exploring where it stands (a driver that cannot go on): best()
  // is what runs from now on.
  void Settle() { settled_ = true; }

  bool settled() const { return settled_; }
  bool has_best() const { return best_.has_value(); }
  const std::string& best() const { return best_->setting; }
  double best_rate() const { return best_ ? best_->window.rate : 0; }
  int tries() const { return tries_; }
  // The setting tried and not yet measured, if any.
  const std::optional<std::string>& pending() const { return pending_; }

 private:
  struct Best {
    std::string setting;
    MeasuredWindow window;
  };
  RetuneRules rules_;
  std::optional<Best> original_;  // the first setting measured: the user's
  std::optional<Best> best_;
  std::optional<Best> top_;  // the highest measured of the settings that beat the original
  std::optional<std::string> pending_;
  std::map<std::string, double> measured_;  // every setting run -> its last window's rate
  int tries_ = 0;
  bool settled_ = false;
};

}  // namespace pipetune::workflow

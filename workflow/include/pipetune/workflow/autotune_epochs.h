// The decisions of `pipetune autotune -- python3 train.py` (autotune_job.h):
// a PyTorch DataLoader retuned between epochs by the retuning rules every
// driver shares (retune_loop.h). The Python side (python/pipetune/
// _autotune.py) holds no rule: at each epoch boundary it ends the trace of
// the epochs run at the current settings (a segment) and asks this decider,
// in the `pipetune autotune` process, what to run next; it applies what it
// is told. Here each segment is planned on as `tune` plans (workflow::Tune,
// under the job's budgets), its rate (batches/s over its whole epochs,
// iterators included) and its spread measured, and the rules judge the
// change it ran and decide the next.
//
//   EpochDecider decider({budgets, rules, "out/train.dataloader.json"});
//   Json answer = decider.Decide({{"segment", "out/train.trace"}, {"epoch", 2},
//                                 {"knobs", {{"num_workers", 0}, ...}}});
//   ... every later boundary: Decide(...) ...
//   decider.Finish();   // the job ended: the best measured settings written if not yet
//
// An answer: {"apply": the kwargs object to set (as `tune` writes it, with
// "ranks" when a rank has its own) or null (keep the running ones),
// "state": "exploring" | "settled" | "stopped", "lines": what to print}.
// "stopped": the segment could not be planned on; the job keeps its
// settings and the decider settles. Decide never fails: what goes wrong
// becomes a "stopped" answer saying why.
#pragma once

#include <optional>
#include <string>

#include "pipetune/base/json.h"
#include "pipetune/tuner/tune_input.h"
#include "pipetune/workflow/retune_loop.h"

namespace pipetune::workflow {

struct EpochDeciderOptions {
  tuner::BudgetFlags budgets;
  RetuneRules rules;
  std::string output;  // where the settled kwargs are written ("" nowhere)
};

class EpochDecider {
 public:
  explicit EpochDecider(EpochDeciderOptions options);

  // One epoch boundary. `request`: {"segment": the trace of the epochs just
  // run, "epoch": the epoch about to start (1-based), "knobs": the settings
  // the segment ran, as the kwargs file holds them (read at the first
  // request only: after it the decider knows what it told the job to run)}.
  Json Decide(const Json& request);

  // The job ended: when exploring, the best measured settings are written
  // (a change that was never measured is not). Idempotent. The lines to
  // print (a write that failed).
  Json Finish();

  bool written() const { return written_; }

 private:
  Json Stopped(int epoch, const std::string& why);
  void Write(const Json& kwargs, Json& lines);

  EpochDeciderOptions options_;
  RetuneLoop loop_;
  std::optional<Json> running_;  // the kwargs the job runs now
  Json best_;                    // the kwargs of the best measured segment
  Json pending_from_;            // the kwargs the change tried left
  double pending_prediction_ = 0;
  bool stopped_ = false;
  bool written_ = false;
};

// The kwargs object as one setting: num_workers, prefetch_factor and
// persistent_workers as torch holds them without workers (null, false),
// pin_memory, and "ranks" when present. Equal settings, equal objects.
Json NormalizedKwargs(const Json& kwargs);

}  // namespace pipetune::workflow

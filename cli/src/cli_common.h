// Small things every command needs: how errors are printed and mapped to exit
// codes, whether a terminal is watching, and the checks of numeric flags.
#pragma once

#include <signal.h>

#include <CLI/CLI.hpp>
#include <atomic>
#include <optional>
#include <string>

#include "pipetune/base/status.h"
#include "pipetune/workflow/exit_code.h"

namespace pipetune::cli {

using workflow::kExitBadInput;
using workflow::kExitCheckFailed;
using workflow::kExitOk;

// Prints "pipetune: error: <message>" on stderr and returns its exit code
// (workflow::ExitCodeFor).
int ReportError(const Status& status);

// True when stderr is a terminal and live progress should be drawn there.
bool StderrIsTerminal();

// What a numeric flag accepts, in the user's words. CLI11's own checks print
// "Value 0 not in range 0.000000 to 1797693134862315708...000000"; these say
// what the flag counts instead: "--cores: expected a positive number of
// cores, got 0". `what` is the unit counted ("cores", "seconds"); `whole`
// refuses fractions (a count of runs), `max` caps the value (and a whole
// number at INT_MAX, so that the conversion after the check cannot fail).
// Not-a-number text, NaN and infinity are refused the same way.
struct NumberRule {
  std::string what;
  double min = 0;
  bool min_allowed = true;  // false: the value must be above `min`
  std::optional<double> max;
  bool whole = false;
};
// The sentence for TEXT against RULE ("" when it is accepted).
std::string CheckNumber(const std::string& text, const NumberRule& rule);
CLI::Validator Number(NumberRule rule);
// The common rules: above 0, and 0 or more.
CLI::Validator Positive(const std::string& what, bool whole = false);
CLI::Validator NonNegative(const std::string& what, bool whole = false);

// Ctrl-C (SIGINT) or SIGTERM during a run (`run`, `autotune`): while one of
// these lives, the first signal sets interrupted(), which the run watches
// (runtime::RunOptions::interrupt) and stops at as at its time limit, so the
// summary and the trace cover what ran; SA_RESETHAND makes a second one end
// the process as usual. Construct it before the config loads, so that a
// signal that comes early also ends the run cleanly. One at a time.
class InterruptHandlers {
 public:
  InterruptHandlers();
  ~InterruptHandlers();
  InterruptHandlers(const InterruptHandlers&) = delete;
  InterruptHandlers& operator=(const InterruptHandlers&) = delete;
  const std::atomic<bool>& interrupted() const;
  int signal() const;  // the signal that came, 0 if none

 private:
  struct sigaction old_int_ = {}, old_term_ = {};
};

// A command run without its input: CLI11 says only "input is required".
// Returns the error that names what the input may be and shows a use, e.g.
// "tune: expected an input: a trace, ...; e.g. pipetune tune run.trace".
Status MissingInput(const std::string& command, const std::string& what, const std::string& example);

}  // namespace pipetune::cli

// How an outcome leaves the process: the one place that maps what happened
// to an exit code, so that every command (and every script that calls one)
// reads the same three answers.
//
//   0  the command did what was asked (a check passed, a tuned config written)
//   1  a check ran and failed (`pipetune check` found a regression)
//   2  bad usage or bad input: a config, trace, baseline or flag that is
//      wrong, a file that cannot be read or written, a run stopped by a
//      failing element function (the data is bad)
//
// A run ended by a signal is the exception a shell expects: 128 + the signal
// (RunExitCode below), so that `pipetune run ... && next` does not go on.
#pragma once

#include "pipetune/base/status.h"

namespace pipetune::workflow {

inline constexpr int kExitOk = 0;
inline constexpr int kExitCheckFailed = 1;
inline constexpr int kExitBadInput = 2;

// What a finished check concluded; the CI gate's verdicts map onto it.
enum class CheckOutcome { kPassed, kFailed };

// The exit code of a Status: 0 when ok; every error is bad usage or bad
// input (2), whatever its code, because each one names something the user
// gave (a file, a flag, an element the data made fail). kUnavailable (an
// optional part not built in) is bad usage of this build.
int ExitCodeFor(const Status& status);

// 0 for kPassed, 1 for kFailed.
int ExitCodeFor(CheckOutcome outcome);

// 128 + signal when a signal interrupted the run, else 0.
int RunExitCode(bool interrupted, int signal_number);

}  // namespace pipetune::workflow

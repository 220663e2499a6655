// Small things every command needs: how errors are printed and mapped to exit
// codes, and whether a terminal is watching.
#pragma once

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

}  // namespace pipetune::cli

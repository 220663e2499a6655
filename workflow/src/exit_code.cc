#include "pipetune/workflow/exit_code.h"

namespace pipetune::workflow {

int ExitCodeFor(const Status& status) { return status.ok() ? kExitOk : kExitBadInput; }

int ExitCodeFor(CheckOutcome outcome) {
  return outcome == CheckOutcome::kPassed ? kExitOk : kExitCheckFailed;
}

int RunExitCode(bool interrupted, int signal_number) {
  return interrupted && signal_number > 0 ? 128 + signal_number : kExitOk;
}

}  // namespace pipetune::workflow

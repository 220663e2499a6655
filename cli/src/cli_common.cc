#include "cli_common.h"

#include <fmt/format.h>
#include <unistd.h>

namespace pipetune::cli {

int ReportError(const Status& status) {
  fmt::print(stderr, "pipetune: error: {}\n", status.message());
  return workflow::ExitCodeFor(status);
}

bool StderrIsTerminal() { return ::isatty(STDERR_FILENO) == 1; }

}  // namespace pipetune::cli

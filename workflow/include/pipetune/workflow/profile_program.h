// `pipetune profile -- COMMAND`: runs any program with tracing switched on
// through its environment, waits for it, and says what it recorded.
//
// A program that links pipetune's tracer starts recording before main() when
// PIPETUNE_TRACE names a file (tracer.h, StartFromEnvironment). Other ways in
// (GPU activity through CUDA's injection variable, a Python bootstrap on the
// module path) are more entries of `environment`, prepared by their parts.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "pipetune/base/status.h"

namespace pipetune::workflow {

struct ProfileOptions {
  std::string trace_path = "pipetune.trace";
  int interval_ms = 100;
  std::vector<std::string> command;  // the program and its arguments
  // Set in the program's environment besides PIPETUNE_TRACE and
  // PIPETUNE_TRACE_INTERVAL_MS.
  std::vector<std::pair<std::string, std::string>> environment;
};

struct ProfiledProgram {
  int exit_code = 0;         // the program's, or 128 + signal when killed
  int signal_number = 0;     // > 0: a signal ended it
  uint64_t trace_bytes = 0;  // of the trace it left
};

// Runs the program and waits for it. Errors (kInvalidInput): an empty
// command, a program that cannot be started, a program that wrote no trace
// (it does not link the tracer). A program that fails after writing a trace
// is not an error: its exit status is in the result, passed through by the CLI.
StatusOr<ProfiledProgram> ProfileProgram(const ProfileOptions& options);

}  // namespace pipetune::workflow

// `pipetune profile -- COMMAND`: runs any program with tracing switched on
// through its environment, waits for it, and says what it recorded.
//
// A program that links pipetune's tracer starts recording before main() when
// PIPETUNE_TRACE names a file (tracer.h, StartFromEnvironment). A CUDA
// program's GPU activity is recorded through CUDA's injection variable
// (tracer/gpu_profile.h, docs/gpu.md). Other ways in (a Python bootstrap on
// the module path) are more entries of `environment`, prepared by their parts.
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
  // The program recorded nothing itself (it links no tracer and used no
  // CUDA): the trace was written here and holds only why there is no GPU
  // activity.
  bool recorded_nothing = false;
  std::string gpu_note;  // why GPU activity will not be recorded, if known up front
};

// Runs the program and waits for it, then makes sure the trace says where
// GPU activity stands (tracer::CompleteProfileTrace). Errors: an empty
// command or a program that cannot be started (kInvalidInput), a trace that
// cannot be completed (kIoError). A program that fails is not an error: its
// exit status is in the result, passed through by the CLI.
StatusOr<ProfiledProgram> ProfileProgram(const ProfileOptions& options);

}  // namespace pipetune::workflow

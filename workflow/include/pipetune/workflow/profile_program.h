// `pipetune profile -- COMMAND`: runs any program with tracing switched on
// through its environment, waits for it, and says what it recorded.
//
// A program that links pipetune's tracer starts recording before main() when
// PIPETUNE_TRACE names a file (tracer.h, StartFromEnvironment). A CUDA
// program's GPU activity is recorded through CUDA's injection variable
// (tracer/gpu_profile.h, docs/gpu.md). Other ways in (a Python bootstrap on
// the module path) are more entries of `environment`, prepared by their parts.
#pragma once

#include <optional>
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
  // The program's stdout goes to stderr: pipetune's own stdout is then only
  // what pipetune prints (`tune --verify --format json` keeps it JSON).
  bool stdout_to_stderr = false;
  // false: record nothing (`profile --apply PLAN --no-trace`): the program
  // runs with `environment` alone, no trace is written or read, and only its
  // exit status comes back.
  bool record = true;
};

// A process of the program that recorded a DataLoader (a rank of a job), and
// how it ended.
struct ProfiledProcess {
  std::string trace;
  std::optional<int> rank;
  int pid = 0;
  std::string ended = "clean";     // "clean", "failed" (its exit status, an exception) or "killed"
  std::optional<int> exit_status;  // what it passed to sys.exit, when it did
  std::string exception;           // an uncaught exception, "Type: message"
};

struct ProfiledProgram {
  // The program's, or 128 + signal when killed. When the program itself
  // exited 0 but one of the processes of its job failed (a launcher that
  // does not pass a rank's failure on): that process's status, 1 when it
  // was killed or gave none.
  int exit_code = 0;
  int signal_number = 0;     // > 0: a signal ended it
  uint64_t trace_bytes = 0;  // of the trace it left
  // The program recorded nothing itself (it links no tracer and used no
  // CUDA): the trace was written here and holds only why there is no GPU
  // activity.
  bool recorded_nothing = false;
  std::string gpu_note;  // why GPU activity will not be recorded, if known up front
  // Every process that recorded a DataLoader's main trace (TRACE and the
  // TRACE.main.<pid> files beside it), by trace path.
  std::vector<ProfiledProcess> processes;
};

// Runs the program and waits for it, then makes sure the trace says where
// GPU activity stands (tracer::CompleteProfileTrace). Errors: an empty
// command or a program that cannot be started (kInvalidInput), a trace that
// cannot be completed (kIoError). A program that fails is not an error: its
// exit status is in the result, passed through by the CLI.
StatusOr<ProfiledProgram> ProfileProgram(const ProfileOptions& options);

}  // namespace pipetune::workflow

#include "pipetune/workflow/profile_program.h"

#include <fmt/format.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>

#include "adapter.h"
#include "pipetune/analyzer/dataloader_trace.h"
#include "pipetune/tracer/gpu_profile.h"
#include "pipetune/workflow/recording.h"

namespace pipetune::workflow {
namespace {

// The child's status when exec fails: the shell's "command not found".
constexpr int kCannotExec = 127;

using Environment = std::vector<std::pair<std::string, std::string>>;

[[noreturn]] void ExecInChild(const ProfileOptions& options, const Environment& gpu_environment) {
  if (options.record) {
    ::setenv("PIPETUNE_TRACE", options.trace_path.c_str(), 1);
    ::setenv("PIPETUNE_TRACE_INTERVAL_MS", std::to_string(options.interval_ms).c_str(), 1);
    for (const auto& [name, value] : gpu_environment) ::setenv(name.c_str(), value.c_str(), 1);
  } else {
    ::unsetenv("PIPETUNE_TRACE");  // one a parent pipetune set must not record this run either
  }
  for (const auto& [name, value] : options.environment) ::setenv(name.c_str(), value.c_str(), 1);
  if (options.stdout_to_stderr) ::dup2(STDERR_FILENO, STDOUT_FILENO);
  std::vector<char*> argv;
  for (const std::string& arg : options.command) argv.push_back(const_cast<char*>(arg.c_str()));
  argv.push_back(nullptr);
  ::execvp(argv[0], argv.data());
  std::fprintf(stderr, "pipetune: error: cannot run %s: %s\n", options.command[0].c_str(),
               std::strerror(errno));
  ::_exit(kCannotExec);
}

// The processes of the program's job, each from its main trace: a kind
// whose recorder writes one per process (a DataLoader's, per rank) says
// which process it was; a trace of another kind (a C++ program's, a
// tf.data script's, the GPU note) is no process of a job.
std::vector<ProfiledProcess> RecordedProcesses(const std::string& trace) {
  std::vector<ProfiledProcess> processes;
  for (const std::string& path : analyzer::JobTracePaths(trace)) {
    std::optional<ProfiledProcess> process = OpenRecording({path}).adapter->RecordedProcess(path);
    if (process) processes.push_back(std::move(*process));
  }
  return processes;
}

}  // namespace

StatusOr<ProfiledProgram> ProfileProgram(const ProfileOptions& options) {
  if (options.command.empty()) return InvalidInput("no program to profile: pipetune profile -- COMMAND ...");
  ProfiledProgram result;
  Environment gpu_environment = tracer::GpuProfileEnvironment(
      tracer::FindInjectionLibrary(), std::getenv("CUDA_INJECTION64_PATH"), &result.gpu_note);
  // A stale trace (a stale rank's TRACE.main.<pid>, a stale worker
  // process's TRACE.<pid>) must not pass for this run's.
  for (const std::string& main : analyzer::JobTracePaths(options.trace_path)) {
    if (!options.record) break;
    for (const std::string& stale : analyzer::DataLoaderTracePaths(main)) ::unlink(stale.c_str());
  }
  std::fflush(nullptr);  // buffered output must not be written twice
  pid_t child = ::fork();
  if (child < 0) return IoError(fmt::format("cannot fork: {}", std::strerror(errno)));
  if (child == 0) ExecInChild(options, gpu_environment);
  int status = 0;
  while (::waitpid(child, &status, 0) < 0 && errno == EINTR) {
  }
  if (WIFSIGNALED(status)) {
    result.signal_number = WTERMSIG(status);
    result.exit_code = 128 + result.signal_number;
  } else {
    result.exit_code = WEXITSTATUS(status);
  }
  if (result.exit_code == kCannotExec && result.signal_number == 0) {
    return InvalidInput(fmt::format("cannot run {} (see the message above)", options.command[0]));
  }
  if (!options.record) return result;
  PIPETUNE_RETURN_IF_ERROR(tracer::CompleteProfileTrace(options.trace_path, options.command[0],
                                                        result.gpu_note, &result.recorded_nothing));
  struct stat info {};
  if (::stat(options.trace_path.c_str(), &info) != 0) {
    return IoError(fmt::format("{}: the trace is gone after the program ended", options.trace_path));
  }
  result.trace_bytes = static_cast<uint64_t>(info.st_size);
  result.processes = RecordedProcesses(options.trace_path);
  if (result.exit_code == 0 && result.processes.size() > 1) {
    for (const ProfiledProcess& process : result.processes) {
      if (process.ended == "clean") continue;
      result.exit_code = process.exit_status.value_or(1);
      break;
    }
  }
  return result;
}

}  // namespace pipetune::workflow

// `pipetune profile [--trace FILE] -- COMMAND ...`: runs any program with
// tracing on. A program that links pipetune's tracer starts recording before
// main() when PIPETUNE_TRACE names a file; this command sets it and waits.
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "cli_common.h"
#include "pipetune/tracer/gpu_profile.h"
#include "commands.h"

namespace pipetune::cli {
namespace {

struct ProfileFlags {
  std::string trace_path = "pipetune.trace";
  int interval_ms = 100;
  std::vector<std::string> command;
};

int Profile(const ProfileFlags& flags) {
  std::string gpu_note;
  const auto gpu_environment = tracer::GpuProfileEnvironment(
      tracer::FindInjectionLibrary(), std::getenv("CUDA_INJECTION64_PATH"), &gpu_note);
  ::unlink(flags.trace_path.c_str());  // a stale trace must not pass for this run's
  pid_t child = ::fork();
  if (child < 0) return ReportError(IoError(fmt::format("cannot fork: {}", std::strerror(errno))));
  if (child == 0) {
    ::setenv("PIPETUNE_TRACE", flags.trace_path.c_str(), 1);
    ::setenv("PIPETUNE_TRACE_INTERVAL_MS", std::to_string(flags.interval_ms).c_str(), 1);
    for (const auto& [name, value] : gpu_environment) ::setenv(name.c_str(), value.c_str(), 1);
    std::vector<char*> argv;
    for (const std::string& arg : flags.command) argv.push_back(const_cast<char*>(arg.c_str()));
    argv.push_back(nullptr);
    ::execvp(argv[0], argv.data());
    fmt::print(stderr, "pipetune: error: cannot run {}: {}\n", flags.command[0], std::strerror(errno));
    ::_exit(127);
  }
  int status = 0;
  while (::waitpid(child, &status, 0) < 0 && errno == EINTR) {
  }
  int child_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  if (child_code == 127) return kExitBadInput;
  // A program that links no tracer and used no CUDA wrote nothing: the
  // trace then holds where GPU activity stands (e.g. "no GPU found").
  bool wrote_trace = false;
  Status completed = tracer::CompleteProfileTrace(flags.trace_path, flags.command[0], gpu_note, &wrote_trace);
  if (!completed.ok()) return ReportError(completed);
  if (wrote_trace) {
    fmt::print(stderr,
               "pipetune: {} recorded no pipeline (it does not link pipetune's tracer; see docs/tracer.md) "
               "and no GPU activity; the trace says why\n",
               flags.command[0]);
  }
  struct stat info {};
  ::stat(flags.trace_path.c_str(), &info);
  if (WIFSIGNALED(status)) {
    fmt::print(stderr, "pipetune: {} was killed by signal {}; the trace holds what it recorded until then\n",
               flags.command[0], WTERMSIG(status));
  } else if (child_code != 0) {
    fmt::print(stderr, "pipetune: {} exited with status {}\n", flags.command[0], child_code);
  }
  fmt::print("trace: {} ({} bytes)\n", flags.trace_path, static_cast<long long>(info.st_size));
  // The program's own exit status passes through, so scripts see its failure.
  return child_code;
}

}  // namespace

void RegisterProfileCommand(CLI::App& app, int& exit_code) {
  auto flags = std::make_shared<ProfileFlags>();
  CLI::App* sub = app.add_subcommand("profile", "Run any program with tracing on: pipetune profile -- COMMAND ...");
  sub->add_option("--trace", flags->trace_path, "Trace file to write")->capture_default_str();
  sub->add_option("--interval-ms", flags->interval_ms, "Snapshot interval")->check(CLI::Range(1, 60000))->capture_default_str();
  sub->add_option("command", flags->command, "The program and its arguments, after --")->required();
  sub->callback([flags, &exit_code] { exit_code = Profile(*flags); });
}

}  // namespace pipetune::cli

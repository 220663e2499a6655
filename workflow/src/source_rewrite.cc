#include "pipetune/workflow/source_rewrite.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "pipetune/base/json.h"
#include "run_directory.h"

namespace pipetune::workflow {
namespace {

namespace fs = std::filesystem;

constexpr int kCannotExec = 127;
constexpr const char* kRewriterName = "pipetune-rewrite";

bool IsExecutable(const fs::path& p) { return ::access(p.c_str(), X_OK) == 0 && fs::is_regular_file(p); }

// The nearest ancestor of `dir` holding compile_commands.json (a build tree).
std::optional<std::string> BuildDirAbove(fs::path dir) {
  std::error_code ec;
  for (int i = 0; i < 4 && !dir.empty(); ++i) {
    if (fs::exists(dir / "compile_commands.json", ec)) return dir.string();
    if (dir == dir.parent_path()) break;
    dir = dir.parent_path();
  }
  return std::nullopt;
}

// Runs argv, collecting stdout and stderr together; returns the exit status.
StatusOr<int> RunCollecting(const std::vector<std::string>& argv, std::string* output) {
  int fds[2];
  if (::pipe(fds) != 0) return IoError(fmt::format("cannot make a pipe: {}", std::strerror(errno)));
  std::fflush(nullptr);
  pid_t child = ::fork();
  if (child < 0) return IoError(fmt::format("cannot fork: {}", std::strerror(errno)));
  if (child == 0) {
    ::dup2(fds[1], 1);
    ::dup2(fds[1], 2);
    ::close(fds[0]);
    ::close(fds[1]);
    std::vector<char*> args;
    for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    ::execvp(args[0], args.data());
    std::fprintf(stderr, "cannot run %s: %s\n", argv[0].c_str(), std::strerror(errno));
    ::_exit(kCannotExec);
  }
  ::close(fds[1]);
  char buffer[4096];
  while (true) {
    ssize_t n = ::read(fds[0], buffer, sizeof buffer);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    output->append(buffer, static_cast<size_t>(n));
  }
  ::close(fds[0]);
  int status = 0;
  while (::waitpid(child, &status, 0) < 0 && errno == EINTR) {
  }
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return WEXITSTATUS(status);
}

}  // namespace

std::optional<std::string> FindRewriter() {
  if (const char* env = std::getenv("PIPETUNE_REWRITE"); env != nullptr && *env != '\0')
    return std::string(env);
  std::error_code ec;
  fs::path self = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    fs::path beside = self.parent_path() / kRewriterName;
    if (IsExecutable(beside)) return beside.string();
  }
  return std::nullopt;
}

StatusOr<SourceRewriteResult> RewriteSource(const SourceRewriteRequest& request) {
  SourceRewriteResult result;
  std::optional<std::string> found =
      request.rewriter.empty() ? FindRewriter() : std::optional(request.rewriter);
  result.rewriter = found.value_or(kRewriterName);

  PIPETUNE_ASSIGN_OR_RETURN(internal::RunDirectory plan_dir,
                            internal::RunDirectory::Make("", "pipetune-plan"));
  fs::path plan_path = plan_dir.File("plan.json");
  {
    std::ofstream out(plan_path);
    out << DumpJson(request.plan, 2) << "\n";
    if (!out) return IoError(fmt::format("{}: cannot write the plan", plan_path.string()));
  }
  result.command = {result.rewriter, "apply", request.source, "--plan", plan_path.string()};
  if (request.in_place) result.command.push_back("-i");
  std::optional<std::string> build_dir;
  if (!request.build_dir.empty()) {
    build_dir = request.build_dir;
  } else if (found) {
    build_dir = BuildDirAbove(fs::path(*found).parent_path());
  }
  if (build_dir) {
    result.command.push_back("-p");
    result.command.push_back(*build_dir);
  }
  StatusOr<int> rc = RunCollecting(result.command, &result.output);
  if (!rc.ok()) return rc.status();
  if (*rc == kCannotExec) {
    return InvalidInput(
        fmt::format("--source: cannot run {} (build it: it needs Clang 14's dev packages and "
                    "PIPETUNE_WITH_CLANG=ON; or set "
                    "PIPETUNE_REWRITE)",
                    result.rewriter));
  }
  if (*rc != 0) {
    std::string message = result.output;
    while (!message.empty() && message.back() == '\n') message.pop_back();
    return InvalidInput(
        fmt::format("--source {}: the source rewrite failed (exit {}), nothing was changed:\n{}",
                    request.source, *rc, message));
  }
  return result;
}

}  // namespace pipetune::workflow

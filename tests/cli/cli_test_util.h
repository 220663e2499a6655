// Runs `pipetune` commands the way a user does and captures what they would
// see: exit code, stdout, stderr. RunPipetune calls the CLI in this process
// (cli::Main with stdout and stderr redirected), which is what most tests
// need; RunPipetuneBinary runs the built binary through the shell, for the
// few end-to-end tests of the executable itself (signals, exit statuses).
#pragma once

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "commands.h"

namespace pipetune::testing {

struct CommandResult {
  int exit_code = -1;
  std::string out;
  std::string err;
};

inline std::string PipetuneBinary() { return std::string(PIPETUNE_BINARY_DIR) + "/cli/pipetune"; }
inline std::string SourcePath(const std::string& relative) {
  return std::string(PIPETUNE_SOURCE_DIR) + "/" + relative;
}

inline std::string ReadFile(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

inline void WriteFile(const std::filesystem::path& path, const std::string& contents) {
  std::ofstream out(path, std::ios::binary);
  out << contents;
}

// A fresh directory under the system temp dir, removed by the destructor.
class TempDir {
 public:
  explicit TempDir(const std::string& name) {
    path_ = std::filesystem::temp_directory_path() /
            (name + "." + std::to_string(::getpid()) + "." + std::to_string(counter_++));
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  ~TempDir() { std::filesystem::remove_all(path_); }
  const std::filesystem::path& path() const { return path_; }
  std::string operator/(const std::string& name) const { return (path_ / name).string(); }

 private:
  static inline int counter_ = 0;
  std::filesystem::path path_;
};

// Runs the `pipetune` binary with ARGS through the shell (arguments are
// passed as written), in `working_dir` when one is given.
inline CommandResult RunPipetuneBinary(const std::string& args, const std::string& working_dir = "") {
  TempDir dir("pipetune_cli_run");
  std::string out_path = dir / "out", err_path = dir / "err";
  std::string command = PipetuneBinary() + " " + args + " >" + out_path + " 2>" + err_path + " </dev/null";
  if (!working_dir.empty()) command = "cd '" + working_dir + "' && " + command;
  int status = std::system(command.c_str());
  CommandResult result;
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  result.out = ReadFile(out_path);
  result.err = ReadFile(err_path);
  return result;
}

// Starts the `pipetune` binary with `args` (argv[1..]), waits until
// `started` exists (the command writes it once its signal handlers are in
// place), lets it run `run_ms` more, sends SIGINT, and returns its wait
// status: what a user's Ctrl-C does to a long command.
inline int InterruptOnceStarted(const std::vector<std::string>& args, const std::string& started,
                                int run_ms) {
  std::string binary = PipetuneBinary();
  std::vector<const char*> argv = {binary.c_str()};
  for (const std::string& a : args) argv.push_back(a.c_str());
  argv.push_back(nullptr);
  pid_t child = fork();
  if (child < 0) return -1;
  if (child == 0) {
    execv(binary.c_str(), const_cast<char* const*>(argv.data()));
    _exit(127);
  }
  for (int i = 0; i < 200 && !std::filesystem::exists(started); ++i) ::usleep(50 * 1000);
  ::usleep(run_ms * 1000);
  ::kill(child, SIGINT);
  int status = 0;
  if (::waitpid(child, &status, 0) != child) return -1;
  return status;
}

// Splits ARGS as a shell would for the simple cases the tests write: words
// separated by spaces, single quotes keep spaces inside a word.
inline std::vector<std::string> SplitArgs(const std::string& args) {
  std::vector<std::string> words;
  std::string word;
  bool quoted = false, any = false;
  for (char c : args) {
    if (c == '\'') {
      quoted = !quoted;
      any = true;
    } else if (c == ' ' && !quoted) {
      if (any) words.push_back(word);
      word.clear();
      any = false;
    } else {
      word += c;
      any = true;
    }
  }
  if (any) words.push_back(word);
  return words;
}

// Runs `pipetune ARGS` in this process: the same cli::Main the binary calls,
// with fds 1 and 2 sent to files for the call, in `working_dir` when given.
inline CommandResult RunPipetune(const std::string& args, const std::string& working_dir = "") {
  TempDir dir("pipetune_cli_call");
  std::vector<std::string> words = SplitArgs(args);
  words.insert(words.begin(), "pipetune");
  std::vector<char*> argv;
  for (std::string& word : words) argv.push_back(word.data());
  argv.push_back(nullptr);

  std::fflush(nullptr);
  std::cout.flush();
  std::cerr.flush();
  int saved_out = ::dup(1), saved_err = ::dup(2);
  std::FILE* out = std::fopen((dir / "out").c_str(), "w");
  std::FILE* err = std::fopen((dir / "err").c_str(), "w");
  ::dup2(::fileno(out), 1);
  ::dup2(::fileno(err), 2);
  std::filesystem::path cwd = std::filesystem::current_path();
  if (!working_dir.empty()) std::filesystem::current_path(working_dir);
  CommandResult result;
  result.exit_code = cli::Main(static_cast<int>(words.size()), argv.data());
  std::fflush(nullptr);
  std::cout.flush();
  std::cerr.flush();
  std::filesystem::current_path(cwd);
  ::dup2(saved_out, 1);
  ::dup2(saved_err, 2);
  ::close(saved_out);
  ::close(saved_err);
  std::fclose(out);
  std::fclose(err);
  result.out = ReadFile(dir / "out");
  result.err = ReadFile(dir / "err");
  return result;
}

}  // namespace pipetune::testing

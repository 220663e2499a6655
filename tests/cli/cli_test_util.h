// Runs the built `pipetune` binary the way a user does and captures what they
// would see: exit code, stdout, stderr.
#pragma once

#include <sys/wait.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

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

// Runs `pipetune ARGS` through the shell (arguments are passed as written),
// in `working_dir` when one is given.
inline CommandResult RunPipetune(const std::string& args, const std::string& working_dir = "") {
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

}  // namespace pipetune::testing

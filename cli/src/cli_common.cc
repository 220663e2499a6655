#include "cli_common.h"

#include <unistd.h>

#include <filesystem>

#include <fmt/format.h>

namespace pipetune::cli {

int ReportError(const Status& status) {
  fmt::print(stderr, "pipetune: error: {}\n", status.message());
  return kExitBadInput;
}

bool StderrIsTerminal() { return ::isatty(STDERR_FILENO) == 1; }

std::string DirectoryOf(const std::string& path) {
  std::filesystem::path parent = std::filesystem::path(path).parent_path();
  return parent.empty() ? std::string(".") : parent.string();
}

}  // namespace pipetune::cli

// run_directory.h: mkdtemp once, removal on destruction.
#include "run_directory.h"

#include <fmt/format.h>
#include <stdlib.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <system_error>
#include <vector>

namespace pipetune::workflow::internal {

namespace fs = std::filesystem;

StatusOr<RunDirectory> RunDirectory::Make(const std::string& configured, const std::string& prefix) {
  RunDirectory dir;
  if (!configured.empty()) {
    std::error_code error;
    fs::create_directories(configured, error);
    if (error)
      return IoError(fmt::format("{}: cannot create the trace directory: {}", configured, error.message()));
    dir.path_ = configured;
    return dir;
  }
  std::error_code error;
  fs::path base = fs::temp_directory_path(error);
  if (error) base = "/tmp";
  std::string pattern = (base / (prefix + "-XXXXXX")).string();
  std::vector<char> buffer(pattern.begin(), pattern.end());
  buffer.push_back('\0');
  if (::mkdtemp(buffer.data()) == nullptr) {
    return IoError(fmt::format("{}: cannot create a temporary directory: {}", pattern, std::strerror(errno)));
  }
  dir.path_ = buffer.data();
  dir.temporary_ = true;
  return dir;
}

RunDirectory::RunDirectory(RunDirectory&& other) noexcept
    : path_(std::move(other.path_)), temporary_(other.temporary_) {
  other.temporary_ = false;
}

RunDirectory::~RunDirectory() {
  std::error_code ignored;
  if (temporary_) fs::remove_all(path_, ignored);
}

}  // namespace pipetune::workflow::internal

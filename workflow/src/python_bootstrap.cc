// The Python bootstrap `pipetune profile` runs a program under (python_bootstrap.h):
// where its folder is, and the environment that puts it first on PYTHONPATH
// with the settings to apply (a file its kind checked: ProgramSettings).
#include "pipetune/workflow/python_bootstrap.h"

#include <fmt/format.h>

#include <cstdlib>
#include <filesystem>

#include "pipetune/workflow/profile_program.h"

namespace pipetune::workflow {
namespace fs = std::filesystem;

StatusOr<std::string> FindPythonBootstrap() {
  std::vector<fs::path> candidates;
  if (const char* env = std::getenv("PIPETUNE_PYTHON_DIR"); env != nullptr && *env != '\0') {
    candidates.emplace_back(env);
  } else {
    std::error_code error;
    fs::path exe = fs::read_symlink("/proc/self/exe", error);
    if (!error) {
      fs::path dir = exe.parent_path();
      candidates.push_back(dir.parent_path() / "python");
      candidates.push_back(dir.parent_path() / PIPETUNE_INSTALL_LIBDIR / "pipetune" / "python");  // installed
    }
  }
  std::string looked;
  for (const fs::path& c : candidates) {
    std::error_code error;
    if (fs::exists(c / "sitecustomize.py", error) && fs::exists(c / "pipetune" / "dataloader.py", error)) {
      return fs::absolute(c, error).lexically_normal().string();
    }
    looked += (looked.empty() ? "" : ", ") + c.string();
  }
  return InvalidInput(
      fmt::format("the Python bootstrap (sitecustomize.py) is not in {} "
                  "(build the pipetune target, or set PIPETUNE_PYTHON_DIR)",
                  looked.empty() ? "any known place" : looked));
}

StatusOr<PythonEnvironment> BootstrapEnvironment(const std::optional<ProgramSettings>& apply) {
  PythonEnvironment env;
  StatusOr<std::string> dir = FindPythonBootstrap();
  if (apply) {
    if (!dir.ok()) return dir.status().WithContext("--apply");
    env.variables.push_back(*apply);
  }
  if (!dir.ok()) {
    env.warning = "Python DataLoaders will not be recorded: " + dir.status().message();
    return env;
  }
  const char* existing = std::getenv("PYTHONPATH");
  std::string path = *dir;
  if (existing != nullptr && *existing != '\0') path += std::string(":") + existing;
  env.variables.emplace_back("PYTHONPATH", path);
  return env;
}

StatusOr<ProfiledProgram> ProfileUnderBootstrap(ProfileOptions options,
                                                const std::optional<ProgramSettings>& apply) {
  PIPETUNE_ASSIGN_OR_RETURN(PythonEnvironment env, BootstrapEnvironment(apply));
  // Run without the bootstrap, the program would record nothing to measure.
  if (!env.warning.empty()) return InvalidInput(env.warning);
  options.environment.insert(options.environment.begin(), env.variables.begin(), env.variables.end());
  return ProfileProgram(options);
}

}  // namespace pipetune::workflow

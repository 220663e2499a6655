// The Python bootstrap a program is profiled under (python_bootstrap.cc;
// PythonBootstrapEnvironment, which asks the adapters, is commands.cc's):
//   pipetune profile [--apply TUNED.json] -- python3 train.py
// The CLI parses flags and prints; where the bootstrap is, the environment
// that puts it first, and a program run under it are here.
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "pipetune/base/status.h"
#include "pipetune/workflow/profile_program.h"

namespace pipetune::workflow {

// The folder holding the bootstrap (sitecustomize.py, the pipetune package
// and libpipetune_tracer.so): $PIPETUNE_PYTHON_DIR, else beside this binary
// (../python in the build tree, ../lib/pipetune/python installed).
// kNotFound-like kInvalidInput naming where it looked.
StatusOr<std::string> FindPythonBootstrap();

// The environment `pipetune profile` adds: the bootstrap first on
// PYTHONPATH (kept after it), and with `apply_path` a file `pipetune tune`
// wrote for the program (DataLoader keyword arguments, a tf.data plan),
// checked by the kind whose file it is (commands.cc asks the adapters: a bad
// file is bad input naming the file and the key). Without a bootstrap found,
// only a warning for stderr and no PYTHONPATH (other programs still profile).
struct PythonEnvironment {
  std::vector<std::pair<std::string, std::string>> variables;
  std::string warning;
};
StatusOr<PythonEnvironment> PythonBootstrapEnvironment(const std::string& apply_path);

// A checked file of settings handed to the program's recorder: the variable
// the bootstrap reads (PIPETUNE_DATALOADER_APPLY, PIPETUNE_TFDATA_APPLY) and
// the file's absolute path.
using ProgramSettings = std::pair<std::string, std::string>;
// The same environment with `apply` already checked (none: the program as
// written); kInvalidInput when `apply` is given and no bootstrap is found.
StatusOr<PythonEnvironment> BootstrapEnvironment(const std::optional<ProgramSettings>& apply);
// A program a tuning loop or the CI gate measures (a round, a run, a job
// retuned between epochs): `options` run under the bootstrap, its
// environment put before options.environment's, `apply` handed to the
// recorder; kInvalidInput when no bootstrap is found (nothing would be
// recorded).
StatusOr<ProfiledProgram> ProfileUnderBootstrap(ProfileOptions options,
                                                const std::optional<ProgramSettings>& apply);

}  // namespace pipetune::workflow

#include "pipetune/workflow/autotune_job.h"

#include <fmt/format.h>
#include <unistd.h>

#include <filesystem>

#include "pipetune/analyzer/dataloader_trace.h"
#include "pipetune/base/json.h"
#include "pipetune/workflow/dataloader.h"
#include "pipetune/workflow/tune.h"

namespace pipetune::workflow {
namespace fs = std::filesystem;

std::string AutotuneSegmentPattern(const std::string& trace) {
  fs::path p(trace);
  return (p.parent_path() / (p.stem().string() + "-retune-{k}" + p.extension().string())).string();
}

std::string AutotuneSegmentTrace(const std::string& trace, int k) {
  std::string path = AutotuneSegmentPattern(trace);
  return path.replace(path.rfind("{k}"), 3, std::to_string(k));
}

namespace {

// A segment of an earlier run left beside the trace would be read with this
// run's (its STEM-retune-K.trace.main.<pid> beside a new one): deleted, with
// every file of its job, before the program starts.
void DeleteStaleSegments(const std::string& trace) {
  for (int k = 1;; ++k) {
    std::string segment = AutotuneSegmentTrace(trace, k);
    std::error_code error;
    if (!fs::exists(segment, error)) break;
    for (const std::string& main : analyzer::JobTracePaths(segment)) {
      for (const std::string& file : analyzer::DataLoaderTracePaths(main)) ::unlink(file.c_str());
    }
    ::unlink(segment.c_str());
  }
}

}  // namespace

StatusOr<AutotuneJobResult> AutotuneJob(const AutotuneJobOptions& options) {
  // Checked here, so that a bad budget is said before the job runs rather
  // than at its first epoch boundary.
  PIPETUNE_RETURN_IF_ERROR(ParseBudgets(options.cores, options.memory, std::nullopt, "").status());
  // Without the bootstrap nothing would retune: an error, not profile's warning.
  PIPETUNE_RETURN_IF_ERROR(FindPythonBootstrap().status());
  PIPETUNE_ASSIGN_OR_RETURN(PythonEnvironment python, BootstrapEnvironment(std::nullopt));
  std::error_code error;
  fs::path self = fs::read_symlink("/proc/self/exe", error);
  if (error) return InvalidInput(fmt::format("cannot find the pipetune binary itself: {}", error.message()));

  AutotuneJobResult result;
  result.output = fs::absolute(DataLoaderKwargsPath(options.output, options.trace_path), error).string();
  Json settings;
  settings["pipetune"] = self.string();
  settings["cores"] = options.cores ? Json(*options.cores) : Json();
  settings["memory"] = options.memory.empty() ? Json() : Json(options.memory);
  settings["output"] = result.output;
  settings["segments"] = AutotuneSegmentPattern(fs::absolute(options.trace_path, error).string());
  DeleteStaleSegments(options.trace_path);

  ProfileOptions profile;
  profile.trace_path = options.trace_path;
  profile.interval_ms = options.interval_ms;
  profile.command = options.command;
  profile.environment = python.variables;
  profile.environment.emplace_back("PIPETUNE_AUTOTUNE", DumpJson(settings));
  PIPETUNE_ASSIGN_OR_RETURN(result.program, ProfileProgram(profile));
  return result;
}

}  // namespace pipetune::workflow

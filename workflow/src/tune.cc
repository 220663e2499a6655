#include "pipetune/workflow/tune.h"

#include <fmt/format.h>

#include <filesystem>
#include <fstream>

#include "decode_probe.h"
#include "handoff_probe.h"
#include "pipetune/analyzer/collector.h"
#include "pipetune/analyzer/diagnosis.h"
#include "pipetune/base/size.h"
#include "pipetune/models/queue_model.h"
#include "pipetune/runtime/function_registry.h"
#include "pipetune/tuner/fusion.h"
#include "pipetune/tuner/plan_report.h"
#include "pipetune/tuner/rewrite.h"
#include "pipetune/workflow/run.h"

namespace pipetune::workflow {
namespace {

namespace fs = std::filesystem;

// A config where a trace belongs is the commonest mix-up; its first byte
// says so before the trace reader refuses the magic.
bool LooksLikeJson(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  char c = 0;
  while (in.get(c)) {
    if (c != ' ' && c != '\n' && c != '\r' && c != '\t') return c == '{';
  }
  return false;
}

// Outputs per snapshot interval over the window: what the queue model reads
// the spread of arrivals from.
std::optional<models::ArrivalSpread> OutputSpread(const analyzer::CollectedTrace& trace,
                                                  const analyzer::Window& window) {
  std::vector<double> counts;
  for (size_t f = window.begin_frame + 1; f <= window.end_frame && f < trace.frames.size(); ++f) {
    counts.push_back(static_cast<double>(trace.frames[f].steps - trace.frames[f - 1].steps));
  }
  return models::SpreadFromCounts(counts);
}

// The main trace is profiled; the others add scaling points.
StatusOr<TracedRun> MakeTracedRun(const analyzer::TraceSet& traces) {
  PIPETUNE_ASSIGN_OR_RETURN(analyzer::ProfiledRun run, analyzer::ProfileCollected(traces.main, traces.extra));
  TracedRun traced;
  traced.host = traces.main.header.host;
  traced.config_path = traces.main.pipeline.config_path;
  traced.input.output_spread = OutputSpread(traces.main, run.window);
  traced.input.profile = std::move(run.profile);
  traced.input.config = std::move(run.config);
  // The engine's own answer to which maps fold (a fusion the tuner may make
  // without a predicted gain): its function registry's chain folds.
  traced.input.folds = [](const models::StageConfig& first, const models::StageConfig& second) {
    return runtime::FunctionRegistry::Builtins().Folds(first, second);
  };
  if (traced.input.config) {
    traced.input.profile.jpeg_entropy = MeasureDecodeCropHost(*traced.input.config, traced.config_path);
  }
  return traced;
}

}  // namespace

StatusOr<TracedRun> CollectProfile(const std::vector<std::string>& trace_paths) {
  for (const std::string& path : trace_paths) {
    if (LooksLikeJson(path)) {
      return InvalidInput(fmt::format(
          "{} is a pipeline config, not a trace: trace a run first (pipetune run {} --trace run.ptrace), "
          "or add --verify to run and tune it in one go",
          path, path));
    }
  }
  PIPETUNE_ASSIGN_OR_RETURN(analyzer::TraceSet traces, analyzer::ReadTraceSet(trace_paths));
  return MakeTracedRun(traces);
}

StatusOr<SolvedTrace> SolveTrace(const TuneRequest& request, bool graph_rewrites) {
  PIPETUNE_ASSIGN_OR_RETURN(TracedRun traced, CollectProfile(request.traces));
  // Only a plan with graph rewrites prices a map fusion: the probe's 1.5 s is
  // spent here, not in every profile (the CI gate reads many).
  if (graph_rewrites && traced.input.config) {
    HandoffCost(request.handoff_ns).PriceInto(*traced.input.config, traced.input.profile);
  }
  PIPETUNE_ASSIGN_OR_RETURN(tuner::Resources resources,
                            tuner::ResolveResources(traced.input, traced.Limits(), request.budgets));
  PIPETUNE_ASSIGN_OR_RETURN(
      tuner::Plan plan,
      graph_rewrites ? tuner::SolveWithRewrites(traced.input, resources, request.objective, request.solver)
                     : tuner::Solve(traced.input, resources, request.objective, request.solver));
  return SolvedTrace{std::move(traced), std::move(plan)};
}

StatusOr<tuner::BudgetFlags> ParseBudgets(std::optional<double> cores, const std::string& memory,
                                          std::optional<int> max_threads, const std::string& cache_dir) {
  tuner::BudgetFlags budgets;
  budgets.cores = cores;
  if (!memory.empty()) {
    StatusOr<uint64_t> bytes = ParseSize(memory);
    if (!bytes.ok()) return bytes.status().WithContext("--memory");
    if (*bytes == 0) return InvalidInput("--memory: must be > 0");
    budgets.memory_bytes = *bytes;
  }
  budgets.max_threads = max_threads;
  if (!cache_dir.empty()) {
    budgets.disk_cache_dir = cache_dir;
    // The free space where the directory is, or would be created.
    fs::path probe = cache_dir;
    std::error_code error;
    while (!probe.empty() && !fs::exists(probe, error)) probe = probe.parent_path();
    fs::space_info space = fs::space(probe.empty() ? fs::path(".") : probe, error);
    if (!error) budgets.disk_free_bytes = space.available;
  }
  return budgets;
}

std::string TunedConfigPath(const std::string& requested, const std::string& config_path,
                            const std::string& pipeline_name) {
  if (!requested.empty()) return requested;
  if (config_path.empty()) return pipeline_name + ".tuned.json";
  fs::path path = config_path;
  return (path.parent_path() / (path.stem().string() + ".tuned.json")).string();
}

std::string FormatDiff(const TunedConfig& written) {
  if (!written.diff) return "";
  return written.diff->empty() ? "(no change)\n" : *written.diff;
}

StatusOr<TunedConfig> WriteTunedConfig(const models::PipelineConfig& original, models::PipelineConfig tuned,
                                       const std::string& original_dir, const std::string& original_label,
                                       const std::string& path, bool with_diff) {
  if (!original_dir.empty()) models::RebaseRelativePaths(tuned, original_dir, DirectoryOf(path));
  PIPETUNE_RETURN_IF_ERROR(models::SaveConfig(tuned, path));
  TunedConfig written{original, std::move(tuned), path, std::nullopt};
  if (with_diff) {
    written.diff = tuner::UnifiedDiff(models::Serialize(original), models::Serialize(written.tuned),
                                      "a/" + original_label, "b/" + path);
  }
  return written;
}

Json TuneResultToJson(const TuneResult& result) {
  Json document = tuner::PlanToJson(result.plan);
  for (const auto& [key, value] : result.written.items()) document[key] = value;
  return document;
}

std::string FormatTuneResult(const TuneResult& result) {
  return tuner::FormatPlanText(result.plan) + result.written_text;
}

}  // namespace pipetune::workflow

// Tuning as users run it: traces -> one profile -> plan -> tuned config,
// where that config goes, and what changed. A DataLoader's trace takes the
// same call (its kind, and the adapter that maps the plan back to its
// knobs, are decided by OpenRecording, recording.h) and writes keyword
// arguments where a config's run writes a tuned config. `pipetune tune`, the tuning loop
// (verify.h), the CI gate and the benchmarks call these; the CLI only parses
// flags into a TuneRequest and prints the result.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "pipetune/base/json.h"
#include "pipetune/base/status.h"
#include "pipetune/models/config.h"
#include "pipetune/tracer/records.h"
#include "pipetune/tuner/plan.h"
#include "pipetune/tuner/solver.h"
#include "pipetune/tuner/tune_input.h"
#include "pipetune/workflow/dataloader_plan.h"
#include "pipetune/workflow/source_rewrite.h"
#include "pipetune/workflow/tfdata.h"

namespace pipetune::workflow {

// A traced run as the tuner takes it: the profile, the config as it ran, the
// spread of output arrivals (consumer steps per snapshot interval over the
// steady window), and the limits of the host it ran on.
struct TracedRun {
  tuner::TuneInput input;
  tracer::HostFacts host;   // from the first trace's header
  std::string config_path;  // absolute path of the config the run read; empty when unknown
  tuner::HostLimits Limits() const { return {host.UsableCores(), host.UsableMemoryBytes()}; }
};

// Reads traces of one pipeline into one profile: the first is measured, the
// others (other parallelism levels) add scaling points. Errors: the reader's
// (file, byte offset) and the analyzer's (traces of different pipelines, a
// trace too short to measure). A JSON file given where a trace belongs is
// refused with a hint (trace a run first, or --verify).
StatusOr<TracedRun> CollectProfile(const std::vector<std::string>& trace_paths);

// Budgets as the user spells them: a memory size ("4GiB"; empty: unset), and a
// cache directory whose free space bounds a disk cache (empty: no disk cache).
StatusOr<tuner::BudgetFlags> ParseBudgets(std::optional<double> cores, const std::string& memory,
                                          std::optional<int> max_threads, const std::string& cache_dir);

// Where a tuned config goes: `requested` when given; else beside the config
// the run read, as STEM.tuned.json; else NAME.tuned.json here.
std::string TunedConfigPath(const std::string& requested, const std::string& config_path,
                            const std::string& pipeline_name);

// A tuned config as written: relative paths rebased from the original's
// directory to the destination's, so they name the same files.
struct TunedConfig {
  models::PipelineConfig original;
  models::PipelineConfig tuned;  // as written, paths rebased
  std::string path;
  std::optional<std::string> diff;  // unified diff original -> tuned when asked for ("" unchanged)
};

// Writes `tuned` to `path` atomically (validated first). `original_dir` is
// where relative paths in it resolve today (empty: they are not rebased);
// `original_label` names the original in the diff.
// The diff when one was asked for ("(no change)" for none), else "".
std::string FormatDiff(const TunedConfig& written);

StatusOr<TunedConfig> WriteTunedConfig(const models::PipelineConfig& original, models::PipelineConfig tuned,
                                       const std::string& original_dir, const std::string& original_label,
                                       const std::string& path, bool with_diff);

struct TuneRequest {
  std::vector<std::string> traces;  // the first is profiled
  tuner::BudgetFlags budgets;
  tuner::Objective objective = tuner::Objective::kMax;
  tuner::SolverOptions solver;
  std::string output;  // empty: TunedConfigPath's default
  bool diff = false;
  // Graph rewrites (tuner/fusion.h) may be proposed. Off for `--source`: the
  // C++ source rewrite changes knobs only.
  bool graph_rewrites = true;
  // The C++ file building the pipeline: the plan's knobs are set in it too
  // (pipetune-rewrite apply -i), with its compile_commands.json's directory.
  // Empty: no source rewrite. Not for a DataLoader's trace (its knobs are
  // keyword arguments).
  std::string source;
  std::string source_build_dir;
  // `--handoff-ns`: the CPU an element's hand-off between two stages costs,
  // in place of the host's probe (workflow/src/handoff_probe.h), so that the
  // plan of a config with adjacent maps is the same from run to run. Unset:
  // measured. A finite number >= 0.
  std::optional<double> handoff_ns;
};

struct TuneResult {
  tuner::Plan plan;
  // The written config; none when the trace holds no config (a program traced
  // with `pipetune profile`) or it was a DataLoader's: the plan is all there is.
  std::optional<TunedConfig> config;
  // A DataLoader's trace: the keyword arguments written (`output`) and the
  // one-line code change, in place of a config.
  std::optional<DataLoaderTuneResult> dataloader;
  // A tf.data trace: the plan keyed by call site (written to its `output`)
  // and the code change, in place of a config.
  std::optional<TfDataPlan> tfdata;
  std::optional<SourceRewriteResult> source;  // when the request named a source
  // Said loudly (stderr) as well as in the plan's notes.
  std::vector<std::string> warnings;
  // What was written, as the kind's adapter says it: the keys the plan's
  // JSON ends with (a config's "config_path" and "diff", a DataLoader's
  // "output", "dataloader_kwargs" and "code_change", a tf.data trace's
  // "output" and "tfdata_plan") and the text printed after the plan's.
  Json written = Json::object();
  std::string written_text;
};

// The traces read as a config's run (CollectProfile), the budgets resolved
// and the plan solved, with graph rewrites priced or not: what a config's
// tune does before it writes the tuned config, and tf.data's before it
// writes a plan keyed by call site.
struct SolvedTrace {
  TracedRun traced;
  tuner::Plan plan;
};
StatusOr<SolvedTrace> SolveTrace(const TuneRequest& request, bool graph_rewrites);

// Decides the traces' kind once (OpenRecording); its adapter collects them, resolves the
// budgets, solves and writes the tuned config (a DataLoader's: its keyword
// arguments, beside the trace by default). Errors: the traces', the
// budgets' and --handoff-ns's (kInvalidInput naming the flag), no plan within the budgets,
// `output` given for a trace with no config, more than one DataLoader
// trace, the tuned config or the source cannot be written.
StatusOr<TuneResult> Tune(const TuneRequest& request);

// The plan JSON of `pipetune tune --format json` (tuner::PlanToJson) with
// what was written (TuneResult::written): a config's `config_path` (null
// without a config) and `diff` when asked for; a DataLoader's `output`,
// `dataloader_kwargs` and `code_change`.
Json TuneResultToJson(const TuneResult& result);
// The same as text: the plan, then what was written (the diff when asked
// for) and the source's rewrite.
std::string FormatTuneResult(const TuneResult& result);

}  // namespace pipetune::workflow

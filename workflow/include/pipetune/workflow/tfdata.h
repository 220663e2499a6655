// What tf.data's adapter (workflow/src/tfdata_adapter.cc, docs/tfdata.md)
// calls: what differs for a tf.data pipeline recorded by the Python
// bootstrap (python/pipetune/_tfdata*.py), and only that. Its trace is a
// pipeline trace: the header's config has one stage per op of the script,
// named by its line, with `call_site` keys, and a "tfdata" record; the
// counts are the stages' own. So the one profile, diagnosis, solver, report,
// export and CI gate read it as they read the engine's config (the adapter
// delegates to the config's). What this file adds:
//
//   - telling a tf.data trace (IsTfDataTraceFile: the adapter's Recognizes);
//   - a solved (tuned) config mapped back to a tf.data plan keyed by call
//     site, and the code change line by line (TfDataPlanFrom);
//   - reading a plan for `profile --apply` (ReadTfDataPlan,
//     TfDataPlanSettings).
//
//   pipetune profile --trace T -- python3 train_tf.py DIR
//   pipetune tune T --memory 1GiB          -> T's stem + .tfdata.json
//   pipetune profile --apply T.tfdata.json -- python3 train_tf.py DIR
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "pipetune/base/json.h"
#include "pipetune/base/status.h"
#include "pipetune/models/config.h"
#include "pipetune/workflow/python_bootstrap.h"

namespace pipetune::workflow {

// The key of the record in a tf.data trace's config and of a plan file.
inline constexpr const char* kTfDataRecordKey = "tfdata";
inline constexpr const char* kTfDataPlanKey = "tfdata_plan";

// Whether `path` is a tf.data recording: its header's config carries the
// "tfdata" record. A file that cannot be read is not one (the reader says
// why, later).
bool IsTfDataTraceFile(const std::string& path);

// A tf.data plan: per call site ("/abs/train_tf.py:32 map"), the knobs the
// bootstrap sets there (num_parallel_calls, cycle_length, buffer_size) and
// what it adds after the call (cache_after: "memory" or a file prefix,
// prefetch_after: a buffer); and the change, line by line, a user would
// make in the script instead ("train_tf.py:32  ds.map(process_path,
// num_parallel_calls=3).cache()").
//
// Where the plan sets every knob TensorFlow's autotune would otherwise tune
// (each map's and interleave's num_parallel_calls, each prefetch's buffer,
// no AUTOTUNE left in any other op's arguments), it also turns the autotuner
// off (`autotune_off`, the file's "options": {"autotune": false}): with
// nothing left to tune, its model's bookkeeping on every element only costs
// CPU the pipeline needs (measured: docs/tfdata.md, "TensorFlow's
// autotuner"). Applied only where no trace is recorded (`profile --apply
// --no-trace`, or the code change): the sampler reads that model.
struct TfDataPlan {
  Json sites = Json::object();
  bool autotune_off = false;
  std::vector<std::string> code_change;
  std::string output;  // where it was written
};

// The plan that turns `traced` (the config in the trace's header) into
// `tuned` (the solver's, with knobs changed and stages inserted). A disk
// cache's directory becomes a file prefix in it, named by the line.
// Errors: a tuned stage that follows no op of the script (kInvalidInput).
StatusOr<TfDataPlan> TfDataPlanFrom(const models::PipelineConfig& traced,
                                    const models::PipelineConfig& tuned);

// The plan file's JSON ({"tfdata_plan": {...}}) and where it goes by
// default: beside the trace, as STEM.tfdata.json.
Json TfDataPlanToJson(const TfDataPlan& plan);
std::string TfDataPlanPath(const std::string& requested, const std::string& trace);

// Whether a file given to --apply is a tf.data plan (it has "tfdata_plan");
// and the plan read and checked: every site a "PATH:LINE METHOD" key (with
// "#N", N >= 2, for the Nth call of the method on one line) whose settings
// are known knobs with values in range. Errors name the file, the site and
// the key (kInvalidInput). The file is untrusted input: ParseTfDataPlan is
// the check on its text (`path` only names it), and fuzz/ runs it.
bool IsTfDataPlanFile(const std::string& path);
StatusOr<Json> ReadTfDataPlan(const std::string& path);
StatusOr<Json> ParseTfDataPlan(std::string_view text, const std::string& path);
// The plan read and checked, named to the bootstrap (PIPETUNE_TFDATA_APPLY).
StatusOr<ProgramSettings> TfDataPlanSettings(const std::string& path);

}  // namespace pipetune::workflow

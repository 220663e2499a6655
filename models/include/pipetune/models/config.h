// The pipeline config: the JSON contract every part of pipetune shares
// (docs/runtime.md; docs/design.md, "Contracts"). Load, validate, save.
//
// A config keeps its original JSON beside the typed fields, so that saving a
// config the tuner changed writes back every key the user had, unknown ones
// included, in the user's order; only the knobs (parallelism, buffer,
// location) and inserted stages differ.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "pipetune/base/json.h"
#include "pipetune/base/status.h"

namespace pipetune::models {

struct StageConfig;

enum class Op {
  kRange,
  kListFiles,
  kReadFile,
  kMap,
  kFilter,
  kShuffle,
  kBatch,
  kPrefetch,
  kCache,
  kRepeat,
  kTake,
};

// "map" -> kMap; nullopt for a name that is not an op.
std::optional<Op> OpFromName(std::string_view name);
const char* OpName(Op op);
// Ops whose `parallelism` knob means worker threads (map, read_file).
bool OpIsParallel(Op op);
// Ops that start a pipeline (range, list_files); only the first stage is one.
bool OpIsSource(Op op);

// "stage \"decode\" (#3): key \"parallelism\": <what>": the one shape of every
// config error, so users learn where to look.
std::string StageKeyError(const StageConfig& stage, std::string_view key, std::string_view what);

// What a failing element function does: stop the run with the error, or count
// the element as failed, drop it and go on. Stage key "on_error".
enum class OnError { kStop, kSkip };

// Where a cache stage keeps its elements. A config spells it "memory" (the
// default) or a directory path; that spelling appears only where configs
// and plans are read and written (FromConfigValue, ConfigValue).
struct CacheLocation {
  std::string directory;  // empty: in memory

  bool in_memory() const { return directory.empty(); }
  static CacheLocation Memory() { return {}; }
  static CacheLocation Disk(std::string dir) { return {std::move(dir)}; }
  // "memory" -> Memory(); anything else names a directory.
  static CacheLocation FromConfigValue(const std::string& value);
  std::string ConfigValue() const;  // "memory" or the directory
  bool operator==(const CacheLocation&) const = default;
};

struct StageConfig {
  std::string name;
  size_t index = 0;  // position in the pipeline, 0-based (errors show it 1-based)
  Op op = Op::kMap;
  std::string fn;                         // map / filter: the registered element function
  Json args = Json::object();             // everything the op or fn needs; never changed by the tuner
  int parallelism = 1;                    // knob: worker threads (map, read_file); absent = 1
  std::optional<int64_t> buffer;          // knob: prefetch depth in elements
  std::optional<CacheLocation> location;  // knob: cache stages; absent = memory
  bool random = false;  // output differs between epochs: nothing may be cached at or after it
  OnError on_error = OnError::kStop;

  // The stage object as read (or as created for an inserted stage); Save()
  // writes it back with the knobs above patched in.
  Json raw = Json::object();
};

struct Resources {
  std::optional<double> cores;                     // CPU cores the pipeline may use
  std::optional<uint64_t> memory_bytes;            // memory budget for buffers and caches
  std::optional<double> storage_bytes_per_second;  // storage bandwidth, when known
};

struct ConsumerConfig {
  // Milliseconds the trainer spends per step; nullopt: drain as fast as possible.
  std::optional<double> step_time_ms;
  // Milliseconds each epoch waits before the pipeline starts, where the
  // training loop makes a new iterator per epoch (a tf.data `for` loop,
  // Keras' model.fit: TensorFlow optimizes and instantiates the pipeline's
  // graph each time). Paid every epoch; nullopt: none.
  std::optional<double> epoch_start_ms;
  // Of epoch_start_ms, the milliseconds spent making the epoch's
  // iterators, whatever the knobs. Given (the tf.data recorder measures
  // it), the rest of epoch_start_ms is taken as the last epoch's pipeline
  // torn down and this one's filled to its first output, which scale with
  // the stages that run each epoch (rate_model.h); nullopt: all of it is
  // paid whatever the knobs.
  std::optional<double> epoch_iterator_ms;
};

struct PipelineConfig {
  std::string name;
  Resources resources;
  std::vector<StageConfig> stages;
  ConsumerConfig consumer;
  Json raw = Json::object();  // the whole document as read
  // Where it was read from: the file's path, or the source name ParseConfig
  // was given. Errors found after parsing (building a stage's element
  // function) name it like every other config error; empty for configs
  // built in code.
  std::string source;

  // Index of the stage called `name`, or nullopt.
  std::optional<size_t> FindStage(std::string_view name) const;
  // Index of the first stage marked random (or a random source), or nullopt.
  std::optional<size_t> FirstRandomStage() const;
};

// Parses and validates. Errors name the source (file name or "<string>"), the
// stage, the key and what was expected, e.g.
//   pipeline.json: stage "decode" (#3): key "parallelism": expected an integer >= 1, got 0
// Not-JSON errors give line and column.
StatusOr<PipelineConfig> ParseConfig(std::string_view text, std::string_view source_name = "<string>");

// The JSON document in `text`, as every file a user hands pipetune is read
// (a config, a tf.data plan): nesting past 64 levels refused before parsing
// (the parser's copies recurse once per level), and a syntax error or a
// number beyond a double refused naming `source_name`, the line, the column
// and the byte (kInvalidInput).
StatusOr<Json> ParseJsonDocument(std::string_view text, std::string_view source_name);
StatusOr<PipelineConfig> LoadConfig(const std::string& path);

// Checks the typed config (the tuner calls it on plans before saving).
Status Validate(const PipelineConfig& config);

// The document with knobs and inserted/removed stages applied, unknown keys
// and key order kept.
Json ToJson(const PipelineConfig& config);
std::string Serialize(const PipelineConfig& config);  // 2-space indented, trailing newline

// Relative file paths in a config (list_files' pattern, a disk cache's
// directory) are relative to the config file's directory. Rewrites them so
// that a copy saved in `to_dir` names the same files as the config in
// `from_dir` did; absolute paths and "memory" stay as they are.
void RebaseRelativePaths(PipelineConfig& config, const std::string& from_dir, const std::string& to_dir);

// Writes atomically: a temporary file beside `path`, fsync, rename. A failure
// leaves any existing file untouched.
Status SaveConfig(const PipelineConfig& config, const std::string& path);

// Typed access to a stage's args with errors that name stage and key.
// Absent key: the default (nullopt when none given).
StatusOr<std::optional<int64_t>> ArgInt(const StageConfig& stage, std::string_view key, int64_t min_value);
StatusOr<std::optional<double>> ArgNumber(const StageConfig& stage, std::string_view key, double min_value);
StatusOr<std::optional<std::string>> ArgString(const StageConfig& stage, std::string_view key);
StatusOr<std::optional<bool>> ArgBool(const StageConfig& stage, std::string_view key);
// A size: a non-negative integer of bytes or a string like "4GiB" (see ParseSize).
StatusOr<std::optional<uint64_t>> ArgSize(const StageConfig& stage, std::string_view key);

// A batch's "drop_last" (torch's name) or "drop_remainder" (tf.data's):
// whether a short last batch is dropped; absent: false. Both given and
// different is an error naming args.drop_last.
StatusOr<bool> BatchDropsRemainder(const StageConfig& stage);
// list_files' image_folder "extensions": lower-case suffixes with their dot;
// absent: torchvision's IMG_EXTENSIONS.
StatusOr<std::vector<std::string>> ArgExtensions(const StageConfig& stage);

}  // namespace pipetune::models

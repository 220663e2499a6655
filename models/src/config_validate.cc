// Rules that span stages, and writing a config back as JSON.
#include <fmt/format.h>

#include <filesystem>
#include <set>

#include "pipetune/models/config.h"

namespace pipetune::models {
namespace {

Status StageError(const StageConfig& stage, std::string_view key, std::string_view what) {
  return InvalidInput(StageKeyError(stage, key, what));
}

// The args each op reads, checked for type and range; the runtime reads the
// same keys with the same accessors.
Status ValidateArgs(const StageConfig& stage) {
  switch (stage.op) {
    case Op::kRange: {
      PIPETUNE_ASSIGN_OR_RETURN(auto count, ArgInt(stage, "count", 0));
      PIPETUNE_ASSIGN_OR_RETURN(auto bytes, ArgSize(stage, "bytes"));
      (void)count;
      (void)bytes;
      return Status::Ok();
    }
    case Op::kListFiles: {
      PIPETUNE_ASSIGN_OR_RETURN(auto pattern, ArgString(stage, "pattern"));
      PIPETUNE_ASSIGN_OR_RETURN(auto folder, ArgString(stage, "image_folder"));
      if (pattern && folder) {
        return StageError(stage, "args.image_folder",
                          "give either pattern (a glob) or image_folder (ROOT/<class>/...), not both");
      }
      if (folder) {
        if (folder->empty()) return StageError(stage, "args.image_folder", "expected a directory, got \"\"");
        PIPETUNE_ASSIGN_OR_RETURN(auto extensions, ArgExtensions(stage));
        (void)extensions;
      } else if (!pattern || pattern->empty()) {
        return StageError(stage, "args.pattern",
                          "missing: list_files needs a glob such as \"data/*.jpg\" (or an image_folder)");
      }
      PIPETUNE_ASSIGN_OR_RETURN(auto seed, ArgInt(stage, "shuffle_seed", 0));
      (void)seed;
      return Status::Ok();
    }
    case Op::kShuffle: {
      PIPETUNE_ASSIGN_OR_RETURN(auto buffer, ArgInt(stage, "buffer", 1));
      if (!buffer) return StageError(stage, "args.buffer", "missing: shuffle needs a buffer size >= 1");
      PIPETUNE_ASSIGN_OR_RETURN(auto seed, ArgInt(stage, "seed", 0));
      (void)seed;
      return Status::Ok();
    }
    case Op::kBatch: {
      PIPETUNE_ASSIGN_OR_RETURN(auto size, ArgInt(stage, "size", 1));
      if (!size) return StageError(stage, "args.size", "missing: batch needs a size >= 1");
      PIPETUNE_ASSIGN_OR_RETURN(bool drop, BatchDropsRemainder(stage));
      (void)drop;
      return Status::Ok();
    }
    case Op::kRepeat: {
      PIPETUNE_ASSIGN_OR_RETURN(auto count, ArgInt(stage, "count", 1));
      (void)count;
      return Status::Ok();
    }
    case Op::kTake: {
      PIPETUNE_ASSIGN_OR_RETURN(auto count, ArgInt(stage, "count", 0));
      if (!count) return StageError(stage, "args.count", "missing: take needs a count >= 0");
      return Status::Ok();
    }
    case Op::kReadFile:
    case Op::kMap:
    case Op::kFilter:
    case Op::kPrefetch:
    case Op::kCache:
      return Status::Ok();  // map/filter args belong to the function: the runtime checks them
  }
  return Status::Ok();
}

Status ValidateKnobs(const StageConfig& stage) {
  bool has_parallelism = stage.raw.contains("parallelism") || stage.parallelism != 1;
  if (has_parallelism && !OpIsParallel(stage.op)) {
    return StageError(stage, "parallelism",
                      fmt::format("only map and read_file stages have workers, not {}", OpName(stage.op)));
  }
  if (stage.parallelism < 1) return StageError(stage, "parallelism", "must be >= 1");
  if (stage.buffer && stage.op != Op::kPrefetch) {
    return StageError(
        stage, "buffer",
        fmt::format("only prefetch stages have a buffer knob (shuffle takes args.buffer), not {}",
                    OpName(stage.op)));
  }
  if (stage.buffer && *stage.buffer < 1) return StageError(stage, "buffer", "must be >= 1");
  if (stage.location && stage.op != Op::kCache) {
    return StageError(stage, "location",
                      fmt::format("only cache stages have a location, not {}", OpName(stage.op)));
  }
  bool needs_fn = stage.op == Op::kMap || stage.op == Op::kFilter;
  if (needs_fn && stage.fn.empty()) {
    return StageError(stage, "fn",
                      fmt::format("missing: a {} stage names its element function", OpName(stage.op)));
  }
  if (!needs_fn && !stage.fn.empty()) {
    return StageError(stage, "fn",
                      fmt::format("only map and filter stages take a function, not {}", OpName(stage.op)));
  }
  return Status::Ok();
}

// Whether the elements reaching stage `index` form a finite epoch: a cache
// needs one, or its first pass never ends.
bool FiniteBefore(const PipelineConfig& config, size_t index) {
  bool finite = true;
  for (size_t i = 0; i < index; ++i) {
    const StageConfig& s = config.stages[i];
    if (s.op == Op::kRange) finite = s.args.contains("count");
    if (s.op == Op::kListFiles) finite = true;
    if (s.op == Op::kRepeat && !s.args.contains("count")) finite = false;
    if (s.op == Op::kTake) finite = true;
  }
  return finite;
}

}  // namespace

Status Validate(const PipelineConfig& config) {
  if (config.stages.empty())
    return InvalidInput("key \"stages\": empty: a pipeline needs at least a source stage");
  std::set<std::string> names;
  for (const StageConfig& stage : config.stages) {
    if (!names.insert(stage.name).second) {
      return StageError(stage, "name",
                        fmt::format("duplicate: another stage is already called \"{}\"", stage.name));
    }
    PIPETUNE_RETURN_IF_ERROR(ValidateKnobs(stage));
    PIPETUNE_RETURN_IF_ERROR(ValidateArgs(stage));
  }
  const StageConfig& first = config.stages.front();
  if (!OpIsSource(first.op)) {
    return StageError(
        first, "op",
        fmt::format("the first stage must be a source (range or list_files), not {}", OpName(first.op)));
  }
  std::optional<size_t> first_random = config.FirstRandomStage();
  for (size_t i = 1; i < config.stages.size(); ++i) {
    const StageConfig& stage = config.stages[i];
    if (OpIsSource(stage.op)) {
      return StageError(stage, "op",
                        fmt::format("{} is a source; only the first stage may be one", OpName(stage.op)));
    }
    if (stage.op == Op::kReadFile && first.op != Op::kListFiles) {
      return StageError(stage, "op",
                        "read_file reads the paths a list_files source yields; this pipeline has none");
    }
    if (stage.op != Op::kCache) continue;
    if (first_random && i >= *first_random) {
      const StageConfig& random = config.stages[*first_random];
      return StageError(
          stage, "op",
          fmt::format(
              "a cache at or after random stage \"{}\" would replay the same random output every epoch; "
              "move the cache before it",
              random.name));
    }
    if (!FiniteBefore(config, i)) {
      return StageError(stage, "op",
                        "the stages before this cache never finish an epoch (endless source or repeat), so "
                        "it could never be filled");
    }
  }
  return Status::Ok();
}

Json ToJson(const PipelineConfig& config) {
  Json document = config.raw.is_object() ? config.raw : Json::object();
  if (!config.name.empty() || document.contains("name")) document["name"] = config.name;
  Json stages = Json::array();
  for (const StageConfig& stage : config.stages) {
    Json object = stage.raw.is_object() ? stage.raw : Json::object();
    object["name"] = stage.name;
    object["op"] = OpName(stage.op);
    if (!stage.fn.empty()) object["fn"] = stage.fn;
    if (!stage.args.empty() || object.contains("args")) object["args"] = stage.args;
    if (OpIsParallel(stage.op) && (stage.parallelism != 1 || object.contains("parallelism"))) {
      object["parallelism"] = stage.parallelism;
    }
    if (stage.buffer) object["buffer"] = *stage.buffer;
    if (stage.location) object["location"] = stage.location->ConfigValue();
    if (stage.random || object.contains("random")) object["random"] = stage.random;
    if (stage.on_error == OnError::kSkip || object.contains("on_error")) {
      object["on_error"] = stage.on_error == OnError::kSkip ? "skip" : "stop";
    }
    stages.push_back(std::move(object));
  }
  document["stages"] = std::move(stages);
  return document;
}

namespace {

// `path` (relative to `from`) as seen from `to`; both directories absolute.
std::string RebasePath(const std::string& path, const std::filesystem::path& from,
                       const std::filesystem::path& to) {
  if (path.empty() || std::filesystem::path(path).is_absolute()) return path;
  std::filesystem::path target = (from / path).lexically_normal();
  std::filesystem::path relative = target.lexically_relative(to);
  return relative.empty() ? target.string() : relative.string();
}

std::filesystem::path AbsoluteDir(const std::string& dir) {
  std::error_code error;
  std::filesystem::path absolute = std::filesystem::absolute(dir.empty() ? "." : dir, error);
  std::filesystem::path normal = (error ? std::filesystem::path(dir) : absolute).lexically_normal();
  // "/a/b/" and "/a/b" are one directory.
  if (!normal.has_filename() && normal.has_relative_path()) normal = normal.parent_path();
  return normal;
}

}  // namespace

void RebaseRelativePaths(PipelineConfig& config, const std::string& from_dir, const std::string& to_dir) {
  std::filesystem::path from = AbsoluteDir(from_dir), to = AbsoluteDir(to_dir);
  if (from == to) return;
  for (StageConfig& stage : config.stages) {
    for (const char* key : {"pattern", "image_folder"}) {
      if (stage.op == Op::kListFiles && stage.args.contains(key) && stage.args[key].is_string()) {
        stage.args[key] = RebasePath(stage.args[key].get<std::string>(), from, to);
      }
    }
    if (stage.op == Op::kCache && stage.location && !stage.location->in_memory()) {
      stage.location->directory = RebasePath(stage.location->directory, from, to);
    }
  }
}

}  // namespace pipetune::models

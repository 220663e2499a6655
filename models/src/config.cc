// Loading, validating and saving the pipeline config.
//
// Parsing happens in two steps, like every importer in pipetune: the text
// becomes JSON (errors give line and column), then the JSON becomes typed
// stages (errors give stage and key). Validate() then checks the rules that
// span stages (sources first, no cache after a random stage, ...).
#include "pipetune/models/config.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <set>
#include <sstream>

#include "config_internal.h"
#include "pipetune/base/files.h"
#include "pipetune/base/json.h"
#include "pipetune/base/size.h"

namespace pipetune::models {

CacheLocation CacheLocation::FromConfigValue(const std::string& value) {
  return value == "memory" ? Memory() : Disk(value);
}

std::string CacheLocation::ConfigValue() const { return in_memory() ? std::string("memory") : directory; }

using internal::DescribeJsonValue;
using internal::IsInteger;

namespace {

struct OpEntry {
  Op op;
  const char* name;
};
constexpr std::array<OpEntry, 11> kOps = {{
    {Op::kRange, "range"},
    {Op::kListFiles, "list_files"},
    {Op::kReadFile, "read_file"},
    {Op::kMap, "map"},
    {Op::kFilter, "filter"},
    {Op::kShuffle, "shuffle"},
    {Op::kBatch, "batch"},
    {Op::kPrefetch, "prefetch"},
    {Op::kCache, "cache"},
    {Op::kRepeat, "repeat"},
    {Op::kTake, "take"},
}};

constexpr std::array<const char*, 9> kStageKeys = {"name",   "op",       "fn",     "args",    "parallelism",
                                                   "buffer", "location", "random", "on_error"};
constexpr std::array<const char*, 5> kDocumentKeys = {"name", "resources", "stages", "consumer",
                                                      "description"};

// Edit distance, to catch "paralellism": a misspelt knob would otherwise be
// kept as an unknown key and silently leave the default in force.
size_t EditDistance(std::string_view a, std::string_view b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

template <size_t N>
std::optional<std::string> NearMiss(std::string_view key, const std::array<const char*, N>& known) {
  for (const char* k : known) {
    if (key == k) return std::nullopt;
  }
  for (const char* k : known) {
    // One edit per five letters (at least one): "paralellism" is caught,
    // "note" is not taken for "name".
    size_t allowed = std::max<size_t>(1, std::string_view(k).size() / 5);
    size_t distance = EditDistance(key, k);
    if (distance > 0 && distance <= allowed && key.size() > 3) return std::string(k);
  }
  return std::nullopt;
}

// Line and column (1-based) of a byte offset, for "not JSON" errors.
std::pair<size_t, size_t> LineAndColumn(std::string_view text, size_t offset) {
  offset = std::min(offset, text.size());
  size_t line = 1, column = 1;
  for (size_t i = 0; i < offset; ++i) {
    if (text[i] == '\n') {
      ++line;
      column = 1;
    } else {
      ++column;
    }
  }
  return {line, column};
}

Status KeyError(const StageConfig& stage, std::string_view key, std::string_view expected, const Json& got) {
  return InvalidInput(
      StageKeyError(stage, key, fmt::format("expected {}, got {}", expected, DescribeJsonValue(got))));
}

StatusOr<StageConfig> ParseStage(const Json& object, size_t index) {
  StageConfig stage;
  stage.index = index;
  if (!object.is_object()) {
    return InvalidInput(
        StageKeyError(stage, "", fmt::format("expected an object, got {}", DescribeJsonValue(object))));
  }
  stage.raw = object;
  if (!object.contains("name"))
    return InvalidInput(StageKeyError(stage, "name", "missing (every stage needs a unique name)"));
  const Json& name = object["name"];
  if (!name.is_string() || name.get<std::string>().empty())
    return KeyError(stage, "name", "a non-empty string", name);
  stage.name = name.get<std::string>();

  for (const auto& [key, value] : object.items()) {
    if (auto near = NearMiss(key, kStageKeys)) {
      return InvalidInput(StageKeyError(stage, key, fmt::format("unknown key; did you mean \"{}\"?", *near)));
    }
  }

  if (!object.contains("op")) return InvalidInput(StageKeyError(stage, "op", "missing"));
  const Json& op = object["op"];
  std::optional<Op> parsed_op = op.is_string() ? OpFromName(op.get<std::string>()) : std::nullopt;
  if (!parsed_op) {
    std::string known;
    for (const OpEntry& e : kOps) known += (known.empty() ? "" : ", ") + std::string(e.name);
    return KeyError(stage, "op", "one of " + known, op);
  }
  stage.op = *parsed_op;

  if (object.contains("fn")) {
    const Json& fn = object["fn"];
    if (!fn.is_string() || fn.get<std::string>().empty()) return KeyError(stage, "fn", "a function name", fn);
    stage.fn = fn.get<std::string>();
  }
  if (object.contains("args")) {
    if (!object["args"].is_object()) return KeyError(stage, "args", "an object", object["args"]);
    stage.args = object["args"];
  }
  if (object.contains("parallelism")) {
    const Json& p = object["parallelism"];
    if (!IsInteger(p) || p.get<int64_t>() < 1 || p.get<int64_t>() > 4096) {
      return KeyError(stage, "parallelism", "an integer from 1 to 4096", p);
    }
    stage.parallelism = static_cast<int>(p.get<int64_t>());
  }
  if (object.contains("buffer")) {
    const Json& b = object["buffer"];
    if (!IsInteger(b) || b.get<int64_t>() < 1) return KeyError(stage, "buffer", "an integer >= 1", b);
    stage.buffer = b.get<int64_t>();
  }
  if (object.contains("location")) {
    const Json& l = object["location"];
    if (!l.is_string() || l.get<std::string>().empty()) {
      return KeyError(stage, "location", "\"memory\" or a directory path", l);
    }
    stage.location = CacheLocation::FromConfigValue(l.get<std::string>());
  }
  if (object.contains("random")) {
    if (!object["random"].is_boolean()) return KeyError(stage, "random", "true or false", object["random"]);
    stage.random = object["random"].get<bool>();
  }
  if (object.contains("on_error")) {
    const Json& e = object["on_error"];
    if (e == "stop") {
      stage.on_error = OnError::kStop;
    } else if (e == "skip") {
      stage.on_error = OnError::kSkip;
    } else {
      return KeyError(stage, "on_error", "\"stop\" or \"skip\"", e);
    }
  }
  return stage;
}

Status ParseResources(const Json& object, Resources* resources) {
  auto error = [](std::string_view key, std::string_view what) {
    return InvalidInput(fmt::format("resources: key \"{}\": {}", key, what));
  };
  if (!object.is_object())
    return InvalidInput("resources: expected an object, got " + DescribeJsonValue(object));
  if (object.contains("cores")) {
    const Json& c = object["cores"];
    if (!c.is_number() || c.get<double>() <= 0) {
      return error("cores", "expected a number > 0, got " + DescribeJsonValue(c));
    }
    resources->cores = c.get<double>();
  }
  for (const char* key : {"memory", "storage_bandwidth"}) {
    if (!object.contains(key)) continue;
    const Json& v = object[key];
    uint64_t bytes = 0;
    if (v.is_number_unsigned()) {
      bytes = v.get<uint64_t>();
    } else if (v.is_string()) {
      std::string text = v.get<std::string>();
      if (std::string_view(key) == "storage_bandwidth" && text.size() > 2 &&
          text.compare(text.size() - 2, 2, "/s") == 0) {
        text.resize(text.size() - 2);
      }
      StatusOr<uint64_t> parsed = ParseSize(text);
      if (!parsed.ok()) return error(key, parsed.status().message());
      bytes = *parsed;
    } else {
      return error(key, "expected a size like \"4GiB\", got " + DescribeJsonValue(v));
    }
    if (bytes == 0) return error(key, "must be more than 0 bytes");
    if (std::string_view(key) == "memory") {
      resources->memory_bytes = bytes;
    } else {
      resources->storage_bytes_per_second = static_cast<double>(bytes);
    }
  }
  return Status::Ok();
}

// The consumer's optional milliseconds: `key`, where present, a number >= 0.
Status ParseConsumerMs(const Json& object, const char* key, std::optional<double>* out) {
  if (!object.contains(key)) return Status::Ok();
  const Json& s = object[key];
  if (!s.is_number() || s.get<double>() < 0) {
    return InvalidInput(
        fmt::format("consumer: key \"{}\": expected a number >= 0, got {}", key, DescribeJsonValue(s)));
  }
  *out = s.get<double>();
  return Status::Ok();
}

Status ParseConsumer(const Json& object, ConsumerConfig* consumer) {
  if (!object.is_object())
    return InvalidInput("consumer: expected an object, got " + DescribeJsonValue(object));
  PIPETUNE_RETURN_IF_ERROR(ParseConsumerMs(object, "step_time_ms", &consumer->step_time_ms));
  PIPETUNE_RETURN_IF_ERROR(ParseConsumerMs(object, "epoch_start_ms", &consumer->epoch_start_ms));
  return ParseConsumerMs(object, "epoch_iterator_ms", &consumer->epoch_iterator_ms);
}

StatusOr<PipelineConfig> ParseDocument(const Json& document) {
  if (!document.is_object()) {
    return InvalidInput("expected a JSON object with \"stages\", got " + DescribeJsonValue(document));
  }
  PipelineConfig config;
  config.raw = document;
  for (const auto& [key, value] : document.items()) {
    if (auto near = NearMiss(key, kDocumentKeys)) {
      return InvalidInput(fmt::format("key \"{}\": unknown key; did you mean \"{}\"?", key, *near));
    }
  }
  if (document.contains("name")) {
    if (!document["name"].is_string())
      return InvalidInput("key \"name\": expected a string, got " + DescribeJsonValue(document["name"]));
    config.name = document["name"].get<std::string>();
  }
  if (document.contains("resources"))
    PIPETUNE_RETURN_IF_ERROR(ParseResources(document["resources"], &config.resources));
  if (document.contains("consumer"))
    PIPETUNE_RETURN_IF_ERROR(ParseConsumer(document["consumer"], &config.consumer));
  if (!document.contains("stages"))
    return InvalidInput("key \"stages\": missing (a pipeline is a list of stages)");
  const Json& stages = document["stages"];
  if (!stages.is_array())
    return InvalidInput("key \"stages\": expected an array, got " + DescribeJsonValue(stages));
  for (size_t i = 0; i < stages.size(); ++i) {
    PIPETUNE_ASSIGN_OR_RETURN(StageConfig stage, ParseStage(stages[i], i));
    config.stages.push_back(std::move(stage));
  }
  return config;
}

}  // namespace

std::optional<Op> OpFromName(std::string_view name) {
  for (const OpEntry& e : kOps) {
    if (name == e.name) return e.op;
  }
  return std::nullopt;
}

const char* OpName(Op op) {
  for (const OpEntry& e : kOps) {
    if (op == e.op) return e.name;
  }
  return "unknown";
}

bool OpIsParallel(Op op) { return op == Op::kMap || op == Op::kReadFile; }
bool OpIsSource(Op op) { return op == Op::kRange || op == Op::kListFiles; }

std::optional<size_t> PipelineConfig::FindStage(std::string_view stage_name) const {
  for (size_t i = 0; i < stages.size(); ++i) {
    if (stages[i].name == stage_name) return i;
  }
  return std::nullopt;
}

std::optional<size_t> PipelineConfig::FirstRandomStage() const {
  for (size_t i = 0; i < stages.size(); ++i) {
    if (stages[i].random) return i;
  }
  return std::nullopt;
}

namespace {

Status NotJsonAt(std::string_view text, std::string_view source_name, size_t offset,
                 std::string_view reason) {
  auto [line, column] = LineAndColumn(text, offset);
  return InvalidInput(fmt::format("{}: not valid JSON at line {}, column {} (byte {}): {}", source_name, line,
                                  column, offset, reason));
}

// Bytes of the input quoted in a message, with control characters and
// bytes that are not ASCII (invalid UTF-8, most likely) written as \xNN.
std::string Printable(std::string_view text) {
  std::string out;
  for (unsigned char c : text) {
    if (c >= 0x20 && c < 0x7f) {
      out += static_cast<char>(c);
    } else {
      out += fmt::format("\\x{:02x}", c);
    }
  }
  return out;
}

// No config nests deeper than a handful of levels; a document that does is
// refused before nlohmann/json sees it, whose copies and destructors recurse
// once per level (100 000 levels overflow the stack).
constexpr int kMaxNesting = 64;

Status CheckNesting(std::string_view text, std::string_view source_name) {
  int depth = 0;
  bool in_string = false, escaped = false;
  for (size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (in_string) {
      if (escaped)
        escaped = false;
      else if (c == '\\')
        escaped = true;
      else if (c == '"')
        in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > kMaxNesting) {
        return NotJsonAt(text, source_name, i, fmt::format("nested deeper than {} levels", kMaxNesting));
      }
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return Status::Ok();
}

}  // namespace

StatusOr<Json> ParseJsonDocument(std::string_view text, std::string_view source_name) {
  PIPETUNE_RETURN_IF_ERROR(CheckNesting(text, source_name));
  Json document;
  try {
    document = Json::parse(text.begin(), text.end());
  } catch (const Json::parse_error& e) {
    // nlohmann's byte is 1-based and points just past the offending character.
    size_t offset = e.byte > 0 ? e.byte - 1 : 0;
    // "[json.exception.parse_error.101] parse error at line 1, column 11:
    // syntax error while parsing value - invalid literal; last read: 'tru'"
    std::string reason = e.what();
    if (size_t colon = reason.find(": "); colon != std::string::npos) reason = reason.substr(colon + 2);
    if (size_t dash = reason.find(" - "); dash != std::string::npos) reason = reason.substr(dash + 3);
    return NotJsonAt(text, source_name, offset, Printable(reason));
  } catch (const Json::exception& e) {
    // A number beyond a double ("1e400") is out_of_range, with no position:
    // point at the number it names.
    std::string reason = e.what();
    if (size_t bracket = reason.find("] "); bracket != std::string::npos) reason = reason.substr(bracket + 2);
    size_t offset = 0;
    if (size_t open = reason.find('\''), close = reason.rfind('\'');
        open != std::string::npos && close > open + 1) {
      offset = std::min(text.find(reason.substr(open + 1, close - open - 1)), text.size());
    }
    return NotJsonAt(text, source_name, offset, Printable(reason));
  }
  return document;
}

StatusOr<PipelineConfig> ParseConfig(std::string_view text, std::string_view source_name) {
  PIPETUNE_ASSIGN_OR_RETURN(Json document, ParseJsonDocument(text, source_name));
  StatusOr<PipelineConfig> config = ParseDocument(document);
  if (!config.ok()) return config.status().WithContext(std::string(source_name));
  PIPETUNE_RETURN_IF_ERROR(Validate(*config).WithContext(std::string(source_name)));
  config->source = std::string(source_name);
  return config;
}

StatusOr<PipelineConfig> LoadConfig(const std::string& path) {
  PIPETUNE_ASSIGN_OR_RETURN(std::string text, ReadFile(path, "the config"));
  return ParseConfig(text, path);
}

std::string Serialize(const PipelineConfig& config) { return DumpJson(ToJson(config), 2) + "\n"; }

Status SaveConfig(const PipelineConfig& config, const std::string& path) {
  PIPETUNE_RETURN_IF_ERROR(Validate(config).WithContext("refusing to save an invalid config"));
  return WriteFileAtomically(path, Serialize(config));
}

}  // namespace pipetune::models

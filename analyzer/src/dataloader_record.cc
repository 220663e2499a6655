// The bootstrap's record of a DataLoader process and the files of a run
// (dataloader_record.h, pipetune/analyzer/dataloader_trace.h): which traces
// belong to a run, what each process was, and the settings it ran with.
#include "dataloader_record.h"

#include <dirent.h>
#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cmath>

namespace pipetune::analyzer {
namespace internal {
namespace {

constexpr const char* kKey = "pipetune_dataloader";
// The record version this reader reads: 2 keeps every count in the trace's
// stages (docs/pytorch.md), so that a killed run's counts survive.
constexpr int kRecordVersion = 2;

// "T.<pid>" -> "T": the main trace a worker's trace belongs to.
std::string MainTraceOf(const std::string& worker_trace) {
  size_t dot = worker_trace.rfind('.');
  return dot == std::string::npos ? worker_trace : worker_trace.substr(0, dot);
}

std::optional<int64_t> OptionalInt64(const Json& object, const char* key) {
  auto it = object.find(key);
  if (it == object.end() || !it->is_number_integer()) return std::nullopt;
  return it->get<int64_t>();
}

}  // namespace

// The bootstrap's record in a trace's latest pipeline info; null when none.
Json RecordOf(const tracer::PipelineInfo& info) {
  if (info.config_json.find(kKey) == std::string::npos) return nullptr;
  Json parsed = Json::parse(info.config_json, nullptr, /*allow_exceptions=*/false);
  if (!parsed.is_object() || !parsed.contains(kKey) || !parsed[kKey].is_object()) return nullptr;
  return parsed[kKey];
}

Status CheckMainRecord(const Json& record, const std::string& path) {
  std::string role = record.is_null() ? "" : Get<std::string>(record, "role", "");
  if (role == "worker") {
    return InvalidInput(
        fmt::format("{} is a DataLoader worker's trace; report its main trace {}", path, MainTraceOf(path)));
  }
  if (role != "main") {
    return InvalidInput(
        fmt::format("{}: not the trace of a PyTorch DataLoader's main process "
                    "(record it with `pipetune profile -- python3 SCRIPT`)",
                    path));
  }
  int version = Get<int>(record, "version", 1);
  if (version < kRecordVersion) {
    return InvalidInput(
        fmt::format("{}: recorded by an older pipetune (DataLoader record version {}, this one reads {}); "
                    "profile the program again",
                    path, version, kRecordVersion));
  }
  if (record.value("loaders", Json::array()).empty()) {
    return InvalidInput(fmt::format("{}: the program built no DataLoader", path));
  }
  return Status::Ok();
}

DataLoaderSettings ReadSettings(const Json& settings) {
  DataLoaderSettings s;
  s.batch_size = std::max(1, Get<int>(settings, "batch_size", 1));
  s.num_workers = Get<int>(settings, "num_workers", 0);
  s.prefetch_factor = Get<int>(settings, "prefetch_factor", 2);
  s.fetch_threads = std::max(1, Get<int>(settings, "fetch_threads", 1));
  s.persistent_workers = Get<bool>(settings, "persistent_workers", false);
  s.pin_memory = Get<bool>(settings, "pin_memory", false);
  s.sampler = Get<std::string>(settings, "sampler", "");
  s.start_method = Get<std::string>(settings, "multiprocessing_context", "");
  s.dataset = Get<std::string>(settings, "dataset", "");
  s.iterable = Get<bool>(settings, "iterable", false);
  if (settings.contains("dataset_length") && settings["dataset_length"].is_number_integer()) {
    s.dataset_length = settings["dataset_length"].get<int64_t>();
  }
  if (settings.contains("batches_per_epoch") && settings["batches_per_epoch"].is_number_integer()) {
    s.batches_per_epoch = settings["batches_per_epoch"].get<int64_t>();
  }
  if (settings.contains("shuffle") && settings["shuffle"].is_boolean())
    s.shuffle = settings["shuffle"].get<bool>();
  s.drop_last = Get<bool>(settings, "drop_last", false);
  if (settings.contains("shards") && settings["shards"].is_number_integer() &&
      settings["shards"].get<int64_t>() > 0) {
    s.shards = settings["shards"].get<int64_t>();
  }
  return s;
}

std::optional<DataLoaderDataset> ReadDataset(const Json& entry) {
  const Json record = entry.value("dataset", Json());
  if (!record.is_object()) return std::nullopt;
  DataLoaderDataset d;
  d.class_name = Get<std::string>(record, "class", "");
  d.module = Get<std::string>(record, "module", "");
  d.folder_base = Get<std::string>(record, "base", "");
  d.root = Get<std::string>(record, "root", "");
  if (record.contains("extensions") && record["extensions"].is_array()) {
    std::vector<std::string> extensions;
    for (const Json& e : record["extensions"]) {
      if (e.is_string()) extensions.push_back(e.get<std::string>());
    }
    d.extensions = std::move(extensions);
  }
  d.loader = Get<std::string>(record, "loader", "");
  d.classes = OptionalInt64(record, "classes");
  d.samples = OptionalInt64(record, "samples");
  d.target_transform = Get<std::string>(record, "target_transform", "");
  d.transform_holder = Get<std::string>(record, "transform_holder", "");
  const Json transforms = record.value("transforms", Json::array());
  if (transforms.is_array()) {
    for (const Json& t : transforms) {
      DataLoaderTransform transform;
      transform.name = Get<std::string>(t, "name", "?");
      transform.module = Get<std::string>(t, "module", "");
      if (t.is_object() && t.contains("params") && t["params"].is_object())
        transform.params = Json(t["params"]);
      d.transforms.push_back(std::move(transform));
    }
  }
  return d;
}

std::optional<int> OptionalInt(const Json& record, const char* key) {
  if (!record.is_object()) return std::nullopt;
  auto it = record.find(key);
  if (it == record.end() || !it->is_number_integer()) return std::nullopt;
  return it->get<int>();
}

void AddGilProbe(const Json& record, DataLoaderGilProbe& sum) {
  const Json probe = record.is_object() ? record.value("gil_probe", Json()) : Json();
  if (!probe.is_object()) return;
  auto count = [&](const char* key) -> std::optional<uint64_t> {
    auto it = probe.find(key);
    if (it == probe.end() || !it->is_number_unsigned()) return std::nullopt;
    return it->get<uint64_t>();
  };
  auto seconds = [&](const char* key) -> std::optional<double> {
    auto it = probe.find(key);
    if (it == probe.end() || !it->is_number()) return std::nullopt;
    const double v = it->get<double>();
    if (!std::isfinite(v) || v < 0) return std::nullopt;
    return v;
  };
  const auto wakes = count("wakes"), late = count("gil_late"), samples = count("samples");
  const auto window = seconds("seconds"), cpu = seconds("cpu_seconds");
  if (!wakes || !late || !samples || !window || !cpu || *late > *wakes) return;
  sum.wakes += *wakes;
  sum.gil_late += *late;
  sum.samples += *samples;
  sum.seconds += *window;
  sum.cpu_seconds += *cpu;
}

}  // namespace internal

bool IsDataLoaderTrace(const tracer::Trace& trace) {
  return !internal::RecordOf(trace.header.pipeline).is_null();
}

bool IsDataLoaderMainTrace(const tracer::Trace& trace) {
  Json record = internal::RecordOf(trace.header.pipeline);
  return !record.is_null() && internal::Get<std::string>(record, "role", "") == "main";
}

bool IsDataLoaderTraceFile(const std::string& path) {
  // The bootstrap starts its session with the record as the config, so the
  // header alone tells.
  StatusOr<tracer::TraceHeader> header = tracer::ReadTraceHeader(path);
  return header.ok() && !internal::RecordOf(header->pipeline).is_null();
}

namespace {

// The files beside `trace` named its base name, then `infix`, then digits
// (a pid), sorted.
std::vector<std::string> NumberedSiblings(const std::string& trace, const std::string& infix) {
  size_t slash = trace.rfind('/');
  // Built in one expression: assigning a literal afterwards trips GCC 12's
  // false -Wrestrict at -O3.
  const std::string dir = slash == std::string::npos ? std::string(".")
                          : slash == 0               ? std::string("/")
                                                     : trace.substr(0, slash);
  std::string prefix = (slash == std::string::npos ? trace : trace.substr(slash + 1)) + infix;
  std::vector<std::string> found;
  if (DIR* d = ::opendir(dir.c_str())) {
    while (dirent* entry = ::readdir(d)) {
      std::string name = entry->d_name;
      if (name.size() <= prefix.size() || name.compare(0, prefix.size(), prefix) != 0) continue;
      if (!std::all_of(name.begin() + static_cast<std::ptrdiff_t>(prefix.size()), name.end(),
                       [](unsigned char c) { return std::isdigit(c); }))
        continue;
      found.push_back(slash == std::string::npos ? name : dir + "/" + name);
    }
    ::closedir(d);
  }
  std::sort(found.begin(), found.end());
  return found;
}

}  // namespace

std::vector<std::string> DataLoaderTracePaths(const std::string& main_trace) {
  std::vector<std::string> paths{main_trace};
  std::vector<std::string> workers = NumberedSiblings(main_trace, ".");
  paths.insert(paths.end(), workers.begin(), workers.end());
  return paths;
}

std::vector<std::string> JobTracePaths(const std::string& trace) {
  std::vector<std::string> paths{trace};
  std::vector<std::string> others = NumberedSiblings(trace, ".main.");
  paths.insert(paths.end(), others.begin(), others.end());
  return paths;
}

const char* HowItEnded(const DataLoaderProfile& p) {
  if (!p.ended_cleanly) return "killed";
  if ((p.exit_status && *p.exit_status != 0) || !p.exit_exception.empty()) return "failed";
  return "clean";
}

DataLoaderProfile DescribeDataLoaderProcess(const tracer::Trace& main) {
  Json record = internal::RecordOf(main.header.pipeline);
  DataLoaderProfile p;
  p.trace_path = main.report.path;
  p.host = main.header.host;
  p.ended_cleanly = main.report.ended_cleanly;
  p.hostname = internal::Get<std::string>(record, "host", main.header.host.hostname);
  p.rank = internal::OptionalInt(record, "rank");
  p.local_rank = internal::OptionalInt(record, "local_rank");
  p.world_size = internal::OptionalInt(record, "world_size");
  p.pid = internal::Get<int>(record, "pid", 0);
  const Json exit = record.is_object() ? record.value("exit", Json()) : Json();
  p.exit_status = internal::OptionalInt(exit, "status");
  p.exit_exception = internal::Get<std::string>(exit, "exception", "");
  const Json process = record.is_object() ? record.value("process", Json()) : Json();
  if (process.is_object() && process.value("seconds", Json()).is_number() &&
      process.value("cpu_seconds", Json()).is_number()) {
    const double seconds = process["seconds"].get<double>(), cpu = process["cpu_seconds"].get<double>();
    if (std::isfinite(seconds) && std::isfinite(cpu) && seconds > 0 && cpu >= 0) {
      p.process_seconds = seconds;
      p.process_cpu_seconds = cpu;
    }
  }
  p.start_monotonic_ns = main.header.clock.start_ns;
  p.start_unix_ns = main.header.clock.start_unix_ns;
  p.duration_seconds = main.DurationNs() / 1e9;
  return p;
}

DataLoaderProcessRole ReadDataLoaderRole(const std::string& path) {
  DataLoaderProcessRole role;
  StatusOr<tracer::TraceHeader> header = tracer::ReadTraceHeader(path);
  if (!header.ok()) return role;
  const Json record = internal::RecordOf(header->pipeline);
  if (record.is_null()) return role;
  role.role = internal::Get<std::string>(record, "role", "");
  role.worker_id = internal::Get<int>(record, "worker_id", 0);
  role.loader = internal::Get<int>(record, "loader", 0);
  return role;
}

}  // namespace pipetune::analyzer

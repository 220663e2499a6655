// Reading a DataLoader run's traces into one profile
// (pipetune/analyzer/dataloader_trace.h).
#include <dirent.h>
#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>

#include "pipetune/analyzer/dataloader_trace.h"

namespace pipetune::analyzer {
namespace {

using nlohmann::json;
constexpr const char* kKey = "pipetune_dataloader";

// The bootstrap's record in a trace's latest pipeline info; null when none.
json RecordOf(const tracer::PipelineInfo& info) {
  if (info.config_json.find(kKey) == std::string::npos) return nullptr;
  json parsed = json::parse(info.config_json, nullptr, /*allow_exceptions=*/false);
  if (!parsed.is_object() || !parsed.contains(kKey) || !parsed[kKey].is_object()) return nullptr;
  return parsed[kKey];
}

template <typename T>
T Get(const json& object, const char* key, T fallback) {
  if (!object.is_object()) return fallback;
  auto it = object.find(key);
  if (it == object.end() || it->is_null()) return fallback;
  try {
    return it->get<T>();
  } catch (const json::exception&) {
    return fallback;
  }
}

DataLoaderStageKind KindOf(const std::string& name) {
  if (name == "load") return DataLoaderStageKind::kLoad;
  if (name.rfind("transform[", 0) == 0) return DataLoaderStageKind::kTransform;
  if (name == "collate") return DataLoaderStageKind::kCollate;
  if (name == "transfer") return DataLoaderStageKind::kTransfer;
  return DataLoaderStageKind::kPinMemory;
}

bool IsDataLoaderStage(const std::string& name) {
  return name == "load" || name.rfind("transform[", 0) == 0 || name == "collate" || name == "transfer" ||
         name == "pin_memory";
}

struct StageSum {
  uint64_t count = 0;
  uint64_t work_ns = 0;
  uint64_t bytes = 0;
  size_t order = 0;
};

// Adds `trace`'s DataLoader stages (their last snapshots) into `sums`.
void AddStages(const tracer::Trace& trace, std::map<std::string, StageSum>& sums, uint64_t* work_ns) {
  for (const tracer::StageDef& stage : trace.stages) {
    if (!IsDataLoaderStage(stage.name)) continue;
    const tracer::StageSnapshot* last = trace.LastSnapshot(stage.id);
    if (last == nullptr || last->produced == 0) continue;
    StageSum& sum = sums[stage.name];
    if (sum.count == 0 && sum.order == 0) sum.order = sums.size();
    sum.count += last->produced;
    sum.work_ns += last->work_ns;
    sum.bytes += last->bytes_produced;
    if (work_ns != nullptr && stage.name != "transfer" && stage.name != "pin_memory")
      *work_ns += last->work_ns;
  }
}

double PeakRss(const tracer::Trace& trace) {
  uint64_t peak = 0;
  for (const tracer::ProcessSample& s : trace.process_samples) peak = std::max(peak, s.rss_bytes);
  return static_cast<double>(peak);
}

double CpuSeconds(const tracer::Trace& trace) {
  return trace.process_samples.empty() ? 0.0 : trace.process_samples.back().cpu_ns / 1e9;
}

DataLoaderStage MakeStage(const std::string& name, const StageSum& sum, int batch_size) {
  DataLoaderStage stage;
  stage.name = name;
  stage.kind = KindOf(name);
  stage.count = sum.count;
  stage.seconds_each = sum.count > 0 ? sum.work_ns / 1e9 / static_cast<double>(sum.count) : 0.0;
  bool per_sample = stage.kind == DataLoaderStageKind::kLoad || stage.kind == DataLoaderStageKind::kTransform;
  stage.per_batch = stage.seconds_each * (per_sample ? std::max(1, batch_size) : 1);
  return stage;
}

}  // namespace

const char* DataLoaderStageKindName(DataLoaderStageKind kind) {
  switch (kind) {
    case DataLoaderStageKind::kLoad:
      return "load";
    case DataLoaderStageKind::kTransform:
      return "transform";
    case DataLoaderStageKind::kCollate:
      return "collate";
    case DataLoaderStageKind::kTransfer:
      return "transfer";
    case DataLoaderStageKind::kPinMemory:
      return "pin_memory";
    case DataLoaderStageKind::kStep:
      return "training step";
    case DataLoaderStageKind::kStartup:
      return "worker start-up";
  }
  return "?";
}

double DataLoaderProfile::WorkerSecondsPerBatch() const {
  double total = collate.seconds_each;
  for (const DataLoaderStage& s : sample_stages) total += s.per_batch;
  return total;
}

double DataLoaderProfile::MeasuredBatchesPerSecond() const {
  double seconds = wait_seconds + step_seconds;
  return seconds > 0 && batches > 0 ? static_cast<double>(batches) / seconds : 0.0;
}

bool IsDataLoaderTrace(const tracer::Trace& trace) { return !RecordOf(trace.header.pipeline).is_null(); }

bool IsDataLoaderTraceFile(const std::string& path) {
  // The bootstrap starts its session with the record as the config, so the
  // header alone tells.
  StatusOr<tracer::TraceHeader> header = tracer::ReadTraceHeader(path);
  return header.ok() && !RecordOf(header->pipeline).is_null();
}

std::vector<std::string> DataLoaderTracePaths(const std::string& main_trace) {
  std::vector<std::string> paths{main_trace};
  size_t slash = main_trace.rfind('/');
  // Built in one expression: assigning a literal afterwards trips GCC 12's
  // false -Wrestrict at -O3.
  const std::string dir = slash == std::string::npos ? std::string(".")
                          : slash == 0               ? std::string("/")
                                                     : main_trace.substr(0, slash);
  std::string base = slash == std::string::npos ? main_trace : main_trace.substr(slash + 1);
  std::vector<std::string> found;
  if (DIR* d = ::opendir(dir.c_str())) {
    while (dirent* entry = ::readdir(d)) {
      std::string name = entry->d_name;
      if (name.size() <= base.size() + 1 || name.compare(0, base.size(), base) != 0 ||
          name[base.size()] != '.') {
        continue;
      }
      std::string suffix = name.substr(base.size() + 1);
      if (!std::all_of(suffix.begin(), suffix.end(), [](unsigned char c) { return std::isdigit(c); }))
        continue;
      found.push_back(slash == std::string::npos ? name : dir + "/" + name);
    }
    ::closedir(d);
  }
  std::sort(found.begin(), found.end());
  paths.insert(paths.end(), found.begin(), found.end());
  return paths;
}

StatusOr<DataLoaderProfile> MakeDataLoaderProfile(const tracer::Trace& main,
                                                  const std::vector<tracer::Trace>& workers) {
  const std::string& path = main.report.path;
  json record = RecordOf(main.header.pipeline);
  if (record.is_null() || Get<std::string>(record, "role", "") != "main") {
    return InvalidInput(
        fmt::format("{}: not the trace of a PyTorch DataLoader's main process "
                    "(record it with `pipetune profile -- python3 SCRIPT`)",
                    path));
  }
  const json loaders = record.value("loaders", json::array());
  const json* chosen = nullptr;
  // The DataLoader that delivered the most batches; on a tie, the one the
  // loop spent the most time with.
  auto time_in = [](const json& loader) {
    return Get<uint64_t>(loader, "wait_ns", 0) + Get<uint64_t>(loader, "step_ns", 0);
  };
  for (const json& loader : loaders) {
    int64_t batches = Get<int64_t>(loader, "batches", 0);
    int64_t best = chosen == nullptr ? -1 : Get<int64_t>(*chosen, "batches", 0);
    if (batches > best || (batches == best && time_in(loader) > time_in(*chosen))) chosen = &loader;
  }
  if (chosen == nullptr || Get<int64_t>(*chosen, "batches", 0) == 0) {
    return InvalidInput(
        fmt::format("{}: stage \"dataloader\": the program took no batch from a DataLoader", path));
  }
  DataLoaderProfile p;
  p.trace_path = path;
  p.host = main.header.host;
  p.cuda_available = Get<bool>(record, "cuda_available", false);
  if (!main.report.warning.empty()) p.warnings.push_back(main.report.warning);
  const json settings = chosen->value("settings", json::object());
  DataLoaderSettings& s = p.settings;
  s.batch_size = std::max(1, Get<int>(settings, "batch_size", 1));
  s.num_workers = Get<int>(settings, "num_workers", 0);
  s.prefetch_factor = Get<int>(settings, "prefetch_factor", 2);
  s.persistent_workers = Get<bool>(settings, "persistent_workers", false);
  s.pin_memory = Get<bool>(settings, "pin_memory", false);
  s.sampler = Get<std::string>(settings, "sampler", "");
  s.start_method = Get<std::string>(settings, "multiprocessing_context", "");
  s.dataset = Get<std::string>(settings, "dataset", "");
  if (settings.contains("dataset_length") && settings["dataset_length"].is_number_integer()) {
    s.dataset_length = settings["dataset_length"].get<int64_t>();
  }
  if (settings.contains("batches_per_epoch") && settings["batches_per_epoch"].is_number_integer()) {
    s.batches_per_epoch = settings["batches_per_epoch"].get<int64_t>();
  }
  const int loader_id = Get<int>(*chosen, "id", 0);

  std::map<std::string, StageSum> sums;
  uint64_t main_data_ns = 0;
  // The main process's stages of this DataLoader only: its samples when it
  // has no workers, the transfer and pinning when it has (the others belong
  // to other DataLoaders of the same script).
  {
    std::map<std::string, StageSum> main_sums;
    uint64_t data_ns = 0;
    AddStages(main, main_sums, &data_ns);
    for (auto& [name, sum] : main_sums) {
      bool transfer_side = name == "transfer" || name == "pin_memory";
      if (s.num_workers > 0 && !transfer_side) continue;
      if (s.num_workers == 0 && name == "transfer") continue;
      if (!transfer_side) main_data_ns += sum.work_ns;
      sums[name] = sum;
    }
  }
  uint64_t worker_data_ns = 0;
  double worker_cpu = 0;
  struct WorkerStart {
    uint64_t start_ns, ready_ns;
  };
  std::vector<WorkerStart> starts;
  for (const tracer::Trace& w : workers) {
    json wr = RecordOf(w.header.pipeline);
    if (wr.is_null() || Get<std::string>(wr, "role", "") != "worker") continue;
    int for_loader = Get<int>(wr, "loader", 0);
    if (for_loader != 0 && for_loader != loader_id) continue;
    ++p.worker_traces;
    if (!w.report.warning.empty()) p.warnings.push_back(w.report.warning);
    AddStages(w, sums, &worker_data_ns);
    worker_cpu += CpuSeconds(w);
    p.worker_rss_bytes = std::max(p.worker_rss_bytes, PeakRss(w));
    starts.push_back({Get<uint64_t>(wr, "start_ns", 0), Get<uint64_t>(wr, "ready_ns", 0)});
  }
  std::vector<std::pair<size_t, std::string>> sample_order;
  for (const auto& [name, sum] : sums) {
    DataLoaderStage stage = MakeStage(name, sum, s.batch_size);
    switch (stage.kind) {
      case DataLoaderStageKind::kLoad:
      case DataLoaderStageKind::kTransform:
        p.sample_stages.push_back(stage);
        break;
      case DataLoaderStageKind::kCollate:
        p.collate = stage;
        break;
      case DataLoaderStageKind::kTransfer:
        p.transfer = stage;
        break;
      default:
        p.pin_memory = stage;
        break;
    }
  }
  // load first, then the transforms in their Compose order.
  std::sort(p.sample_stages.begin(), p.sample_stages.end(),
            [](const DataLoaderStage& a, const DataLoaderStage& b) {
              if ((a.kind == DataLoaderStageKind::kLoad) != (b.kind == DataLoaderStageKind::kLoad)) {
                return a.kind == DataLoaderStageKind::kLoad;
              }
              size_t ia = std::strtoul(a.name.c_str() + std::min<size_t>(a.name.size(), 10), nullptr, 10);
              size_t ib = std::strtoul(b.name.c_str() + std::min<size_t>(b.name.size(), 10), nullptr, 10);
              return ia < ib;
            });
  if (p.collate.name.empty()) p.collate.name = "collate", p.collate.kind = DataLoaderStageKind::kCollate;
  if (p.transfer.name.empty()) p.transfer.name = "transfer", p.transfer.kind = DataLoaderStageKind::kTransfer;
  if (p.pin_memory.name.empty())
    p.pin_memory.name = "pin_memory", p.pin_memory.kind = DataLoaderStageKind::kPinMemory;
  if (p.collate.count > 0) p.batch_bytes = static_cast<double>(sums["collate"].bytes) / p.collate.count;

  // The consumer: this DataLoader's own steps where recorded, else the
  // trace's consumer totals.
  uint64_t steps = Get<uint64_t>(*chosen, "steps", 0);
  if (steps > 0) {
    p.wait_seconds = Get<uint64_t>(*chosen, "wait_ns", 0) / 1e9;
    p.step_seconds = Get<uint64_t>(*chosen, "step_ns", 0) / 1e9;
  } else if (!main.consumer_totals.empty()) {
    const tracer::ConsumerTotals& c = main.consumer_totals.back();
    steps = c.steps;
    p.wait_seconds = c.wait_ns / 1e9;
    p.step_seconds = c.step_ns / 1e9;
  }
  p.batches = std::max<uint64_t>(steps, Get<uint64_t>(*chosen, "batches", 0));
  p.step.name = "training step";
  p.step.kind = DataLoaderStageKind::kStep;
  if (steps > 0) {
    p.step.count = steps;
    p.step.seconds_each = p.step_seconds / static_cast<double>(steps);
    p.step.per_batch = p.step.seconds_each;
  }
  p.main_rss_bytes = PeakRss(main);
  p.worker_cpu_seconds = worker_cpu;
  if (worker_data_ns > 0 && worker_cpu > 0) {
    p.worker_cpu_ratio = std::clamp(worker_cpu / (worker_data_ns / 1e9), 0.1, 2.0);
  }
  double main_cpu = CpuSeconds(main);
  if (worker_data_ns > 0 && worker_cpu > 0) {
    p.loading_cpu_share = worker_cpu / (worker_data_ns / 1e9);
  } else if (main_data_ns > 0 && main_cpu > 0) {
    p.loading_cpu_share = main_cpu / (main_data_ns / 1e9);
  }
  // Busy but off the CPU is either storage or other processes taking the
  // cores. Samples read from the page cache (under 16 KiB from storage each)
  // are not waiting on storage: the share is contention, and the cores the
  // model counts are busy for the whole of the samples' wall time.
  int64_t storage_bytes = 0;
  bool storage_known = true;
  auto add_reads = [&](const tracer::Trace& t) {
    if (t.process_samples.empty() || t.process_samples.back().read_bytes < 0) {
      storage_known = false;
      return;
    }
    storage_bytes += t.process_samples.back().read_bytes;
  };
  add_reads(main);
  for (const tracer::Trace& w : workers) add_reads(w);
  uint64_t samples = 0;
  for (const DataLoaderStage& st : p.sample_stages) {
    if (st.kind == DataLoaderStageKind::kLoad) samples = st.count;
  }
  p.shared_host = p.loading_cpu_share < 0.75 && storage_known && samples > 0 &&
                  static_cast<double>(storage_bytes) / static_cast<double>(samples) < 16384.0;
  if (p.shared_host) p.worker_cpu_ratio = 1.0;
  if (p.batches > 0) {
    p.main_other_cpu_per_batch =
        std::max(0.0, (main_cpu - main_data_ns / 1e9) / static_cast<double>(p.batches));
  }
  for (const json& e : chosen->value("epochs", json::array())) {
    DataLoaderEpoch epoch;
    epoch.batches = Get<uint64_t>(e, "batches", 0);
    p.epochs.push_back(epoch);
  }
  // Worker start-up: from the epoch's iterator creation until its last
  // worker is ready; a worker belongs to the last epoch that began before it.
  const json epochs_json = chosen->value("epochs", json::array());
  for (size_t i = 0; i < p.epochs.size(); ++i) {
    uint64_t begin = Get<uint64_t>(epochs_json[i], "start_ns", 0);
    uint64_t end = i + 1 < p.epochs.size() ? Get<uint64_t>(epochs_json[i + 1], "start_ns", 0)
                                           : std::numeric_limits<uint64_t>::max();
    uint64_t last_ready = 0;
    for (const WorkerStart& w : starts) {
      if (w.start_ns < begin || w.start_ns >= end) continue;
      ++p.epochs[i].workers_started;
      last_ready = std::max(last_ready, w.ready_ns);
    }
    if (last_ready > begin) p.epochs[i].startup_seconds = (last_ready - begin) / 1e9;
  }
  return p;
}

StatusOr<DataLoaderProfile> ReadDataLoaderProfile(const std::string& main_trace) {
  std::vector<std::string> paths = DataLoaderTracePaths(main_trace);
  StatusOr<tracer::Trace> main = tracer::LoadTrace(paths[0]);
  if (!main.ok()) return main.status();
  std::vector<tracer::Trace> workers;
  std::vector<std::string> unreadable;
  for (size_t i = 1; i < paths.size(); ++i) {
    StatusOr<tracer::Trace> w = tracer::LoadTrace(paths[i]);
    if (!w.ok()) {
      unreadable.push_back(w.status().message());
      continue;
    }
    workers.push_back(std::move(*w));
  }
  StatusOr<DataLoaderProfile> profile = MakeDataLoaderProfile(*main, workers);
  if (profile.ok()) {
    for (const std::string& u : unreadable) profile->warnings.push_back("skipped a worker's trace: " + u);
  }
  return profile;
}

}  // namespace pipetune::analyzer

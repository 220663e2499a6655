// Reading a DataLoader run's traces into one profile
// (pipetune/analyzer/dataloader_trace.h); the bootstrap's record in each
// trace is read by dataloader_record.cc.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <optional>

#include "dataloader_record.h"
#include "dataloader_timeline.h"
#include "pipetune/analyzer/dataloader_trace.h"
#include "pipetune/base/json.h"

namespace pipetune::analyzer {
namespace {

// A loading process that got under this share of what it could get (a core,
// or its share when the workers outnumber the cores) had other programs
// beside it (LoadingShareMeansSharedHost).
constexpr double kSharedHostShare = 0.75;
// The share of the loading's time off the CPU spent runnable, waiting for a
// core, from which that time is contention rather than waiting inside load.
constexpr double kContentionShareOfOffCpu = 0.5;

DataLoaderStageKind KindOf(const std::string& name) {
  if (name == "load") return DataLoaderStageKind::kLoad;
  if (name.rfind("transform[", 0) == 0) return DataLoaderStageKind::kTransform;
  if (name == "collate") return DataLoaderStageKind::kCollate;
  if (name == "transfer") return DataLoaderStageKind::kTransfer;
  return DataLoaderStageKind::kPinMemory;
}

bool IsDataStage(const std::string& name) {
  return name == "load" || name.rfind("transform[", 0) == 0 || name == "collate" || name == "transfer" ||
         name == "pin_memory";
}

struct StageSum {
  uint64_t count = 0;
  uint64_t work_ns = 0;
  uint64_t cpu_ns = 0;
  uint64_t bytes = 0;
};

// The stages of `trace` named prefix + NAME, by NAME: their last snapshots
// (the counts up to the last snapshot a killed process wrote).
std::map<std::string, StageSum> StagesOf(const tracer::Trace& trace, const std::string& prefix) {
  std::map<std::string, StageSum> sums;
  for (const tracer::StageDef& stage : trace.stages) {
    if (stage.name.size() <= prefix.size() || stage.name.compare(0, prefix.size(), prefix) != 0) continue;
    std::string name = stage.name.substr(prefix.size());
    if (name.find('/') != std::string::npos) continue;  // another DataLoader's
    const tracer::StageSnapshot* last = trace.LastSnapshot(stage.id);
    if (last == nullptr) continue;
    StageSum& sum = sums[name];
    sum.count += last->produced;
    sum.work_ns += last->work_ns;
    sum.cpu_ns += last->cpu_ns;
    sum.bytes += last->bytes_produced;
  }
  return sums;
}

StageSum Find(const std::map<std::string, StageSum>& sums, const std::string& name) {
  auto it = sums.find(name);
  return it == sums.end() ? StageSum{} : it->second;
}

// The main process's stages of DataLoader `id` ("loaderID/NAME").
std::string LoaderPrefix(int id) { return fmt::format("loader{}/", id); }

double PeakRss(const tracer::Trace& trace) {
  uint64_t peak = 0;
  for (const tracer::ProcessSample& s : trace.process_samples) peak = std::max(peak, s.rss_bytes);
  return static_cast<double>(peak);
}

// The program's CPU at a process sample: the process's less the recorder's
// own sampler thread (tracer::ProcessSample::recorder_cpu_ns), which the
// program pays only while traced (35 ms over an 18 s loop in a DataLoader's
// main process at the default interval). A trace that predates the figure
// keeps the process's.
double ProgramCpuSeconds(const tracer::ProcessSample& s) {
  const uint64_t recorder = s.recorder_cpu_ns > 0 ? static_cast<uint64_t>(s.recorder_cpu_ns) : 0;
  return static_cast<double>(s.cpu_ns - std::min(s.cpu_ns, recorder)) / 1e9;
}

double CpuSeconds(const tracer::Trace& trace) {
  return trace.process_samples.empty() ? 0.0 : ProgramCpuSeconds(trace.process_samples.back());
}

DataLoaderStage MakeStage(const std::string& name, const StageSum& sum, int batch_size) {
  DataLoaderStage stage;
  stage.name = name;
  stage.kind = KindOf(name);
  stage.count = sum.count;
  if (sum.count > 0) {
    stage.seconds_each = sum.work_ns / 1e9 / static_cast<double>(sum.count);
    stage.cpu_seconds_each = sum.cpu_ns / 1e9 / static_cast<double>(sum.count);
  }
  bool per_sample = stage.kind == DataLoaderStageKind::kLoad || stage.kind == DataLoaderStageKind::kTransform;
  stage.per_batch = stage.seconds_each * (per_sample ? std::max(1, batch_size) : 1);
  return stage;
}

// The DataLoader that delivered the most batches; on a tie, the one the loop
// spent the most time with (wait + step).
const Json* ChooseLoader(const Json& loaders, const tracer::Trace& main, uint64_t* batches) {
  const Json* chosen = nullptr;
  uint64_t best_batches = 0, best_ns = 0;
  for (const Json& loader : loaders) {
    auto sums = StagesOf(main, LoaderPrefix(internal::Get<int>(loader, "id", 0)));
    uint64_t n = Find(sums, "next").count;
    uint64_t ns = Find(sums, "next").work_ns + Find(sums, "step").work_ns;
    if (chosen == nullptr || n > best_batches || (n == best_batches && ns > best_ns)) {
      chosen = &loader;
      best_batches = n;
      best_ns = ns;
    }
  }
  *batches = best_batches;
  return chosen;
}

// The consumer, from the DataLoader's `next` (one per batch delivered; its
// work is the wait in next()) and `step` stages (the loop's time between
// batches, with the main thread's CPU in it).
void ReadConsumer(const std::map<std::string, StageSum>& sums, DataLoaderProfile& p) {
  StageSum next = Find(sums, "next"), step = Find(sums, "step");
  p.batches = next.count;
  p.wait_seconds = next.work_ns / 1e9;
  p.step_seconds = step.work_ns / 1e9;
  p.iterator_seconds = Find(sums, "epoch").work_ns / 1e9;
  p.step.name = "training step";
  p.step.kind = DataLoaderStageKind::kStep;
  if (step.count > 0) {
    p.step.count = step.count;
    p.step.seconds_each = p.step_seconds / static_cast<double>(step.count);
    p.step.per_batch = p.step.seconds_each;
    p.step.cpu_seconds_each = step.cpu_ns / 1e9 / static_cast<double>(step.count);
  }
}

struct WorkerStart {
  uint64_t start_ns, ready_ns;
};

// The epochs, from the spans of the DataLoader's `epoch` stage (one per
// iterator made, beginning when it was asked for; its element id is the
// batches delivered before it), and the workers each one started: a worker
// belongs to the last epoch that began before it entered its loop.
void ReadEpochs(const tracer::Trace& main, const std::string& prefix, uint64_t epoch_count,
                const std::vector<WorkerStart>& starts, DataLoaderProfile& p) {
  tracer::StageId epoch_stage = tracer::kInvalidStage;
  for (const tracer::StageDef& stage : main.stages) {
    if (stage.name == prefix + "epoch") epoch_stage = stage.id;
  }
  std::vector<tracer::SpanRecord> spans;
  for (const tracer::SpanRecord& span : main.spans) {
    if (span.stage == epoch_stage) spans.push_back(span);
  }
  std::sort(spans.begin(), spans.end(),
            [](const tracer::SpanRecord& a, const tracer::SpanRecord& b) { return a.begin_ns < b.begin_ns; });
  for (size_t i = 0; i < spans.size(); ++i) {
    DataLoaderEpoch epoch;
    uint64_t until = i + 1 < spans.size() ? spans[i + 1].element_id : p.batches;
    epoch.batches = until > spans[i].element_id ? until - spans[i].element_id : 0;
    uint64_t begin = spans[i].begin_ns;
    uint64_t end = i + 1 < spans.size() ? spans[i + 1].begin_ns : std::numeric_limits<uint64_t>::max();
    uint64_t last_ready = 0;
    uint64_t first_start = std::numeric_limits<uint64_t>::max(), last_start = 0;
    for (const WorkerStart& w : starts) {
      if (w.start_ns < begin || w.start_ns >= end) continue;
      ++epoch.workers_started;
      last_ready = std::max(last_ready, w.ready_ns);
      first_start = std::min(first_start, w.start_ns);
      last_start = std::max(last_start, w.start_ns);
    }
    if (last_ready > begin) epoch.startup_seconds = (last_ready - begin) / 1e9;
    if (epoch.workers_started >= 2) epoch.start_spread_seconds = (last_start - first_start) / 1e9;
    p.epochs.push_back(epoch);
  }
  if (!spans.empty() && spans.front().begin_ns > main.header.clock.start_ns) {
    p.loop_begin_seconds = (spans.front().begin_ns - main.header.clock.start_ns) / 1e9;
  }
  // Each epoch is an iterator the loop asked for, and all but the last took
  // a batch or more; a counter beyond that, or beyond 65536 epochs whose
  // start went unrecorded, is not a run's but a damaged trace's (found by
  // fuzz/trace_analysis_fuzz.cc, which had the profile allocate 400 GB for
  // one, then 50 TB with the batches' counter damaged too; a million took
  // 22 s to diagnose under the sanitizers). Counted as the most those allow.
  constexpr uint64_t kMostUnrecordedEpochs = uint64_t{1} << 16;
  const uint64_t most_epochs = spans.size() + std::min(p.batches + 1, kMostUnrecordedEpochs);
  if (epoch_count > most_epochs) {
    p.warnings.push_back(
        fmt::format("stage \"{}epoch\" counts {} epochs, more than its {} batches allow: counted as {}",
                    prefix, epoch_count, p.batches, most_epochs));
    epoch_count = most_epochs;
  }
  if (epoch_count > spans.size()) {
    p.warnings.push_back(
        fmt::format("{} of {} epochs' starts were not recorded (sampled away): their batches "
                    "count in the epoch before them",
                    epoch_count - spans.size(), epoch_count));
    p.epochs.resize(epoch_count);
  }
}

// The loading processes' main threads' run-queue delay over their sessions
// (tracer::ProcessSample::main_thread_run_delay_ns); -1 when a trace lacks it.
double RunDelaySeconds(const std::vector<const tracer::Trace*>& loading) {
  double seconds = 0;
  for (const tracer::Trace* t : loading) {
    if (t->process_samples.empty() || t->process_samples.back().main_thread_run_delay_ns < 0) return -1;
    seconds += static_cast<double>(t->process_samples.back().main_thread_run_delay_ns) / 1e9;
  }
  return loading.empty() ? -1 : seconds;
}

// Busy but off the CPU is waiting inside the work (storage, the network, a
// lock, a sleep) or other processes taking the cores. The run-queue delay
// tells them apart where the trace has it: time runnable but without a core
// is contention, the rest of the time off the CPU is waiting. Without it,
// samples read from the page cache (under 16 KiB from storage each) are
// taken not to wait: the share is contention, and the cores the model
// counts are busy for the whole of the samples' wall time.
void ReadCpuShares(const tracer::Trace& main, const std::vector<const tracer::Trace*>& workers,
                   const StageSum& main_data, uint64_t worker_data_ns, DataLoaderProfile& p) {
  const uint64_t main_data_ns = main_data.work_ns;
  double worker_cpu = 0;
  for (const tracer::Trace* w : workers) {
    worker_cpu += CpuSeconds(*w);
    if (w->process_samples.size() >= 2) {
      p.worker_session_cpu_seconds +=
          ProgramCpuSeconds(w->process_samples.back()) - ProgramCpuSeconds(w->process_samples.front());
    }
  }
  p.worker_cpu_seconds = worker_cpu;
  double main_cpu = CpuSeconds(main);
  std::vector<const tracer::Trace*> loading = {&main};
  if (worker_data_ns > 0 && worker_cpu > 0) {
    p.worker_cpu_ratio = std::clamp(worker_cpu / (worker_data_ns / 1e9), 0.1, 2.0);
    p.loading_cpu_share = worker_cpu / (worker_data_ns / 1e9);
    p.loading_off_cpu_seconds = std::max(0.0, worker_data_ns / 1e9 - worker_cpu);
    loading = workers;
  } else if (main_data_ns > 0 && main_cpu > 0) {
    p.loading_cpu_share = main_cpu / (main_data_ns / 1e9);
    p.loading_off_cpu_seconds = std::max(0.0, main_data_ns / 1e9 - main_cpu);
  }
  p.loading_run_delay_seconds = RunDelaySeconds(loading);
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
  for (const tracer::Trace* w : workers) add_reads(*w);
  uint64_t samples = 0;
  for (const DataLoaderStage& st : p.sample_stages) {
    if (st.kind == DataLoaderStageKind::kLoad) samples = st.count;
  }
  const bool low_share =
      LoadingShareMeansSharedHost(p.loading_cpu_share, p.settings.num_workers, p.host.UsableCores());
  const bool delay_known = p.loading_run_delay_seconds >= 0;
  const bool contention = RunDelayMeansContention(p.loading_run_delay_seconds, p.loading_off_cpu_seconds);
  p.loading_waits_off_cpu = low_share && delay_known && !contention;
  p.shared_host =
      low_share &&
      (delay_known ? contention
                   : storage_known && samples > 0 &&
                         static_cast<double>(storage_bytes) / static_cast<double>(samples) < 16384.0);
  if (p.shared_host) p.worker_cpu_ratio = 1.0;
  if (p.batches > 0) {
    p.main_other_cpu_per_batch =
        std::max(0.0, (main_cpu - main_data.cpu_ns / 1e9) / static_cast<double>(p.batches));
  }
}

// Sorts `sums` into the profile's stages: load first, then the transforms
// in their Compose order; collate, transfer and pin_memory by name.
void PlaceStages(const std::map<std::string, StageSum>& sums, DataLoaderProfile& p) {
  for (const auto& [name, sum] : sums) {
    DataLoaderStage stage = MakeStage(name, sum, p.settings.batch_size);
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
  if (p.collate.count > 0) {
    for (DataLoaderStage& s : p.sample_stages) {
      if (s.count == 0) continue;
      s.visits_per_batch = static_cast<double>(s.count) / static_cast<double>(p.collate.count);
      s.per_batch = s.seconds_each * s.visits_per_batch;
    }
  }
  if (p.transfer.name.empty()) p.transfer.name = "transfer", p.transfer.kind = DataLoaderStageKind::kTransfer;
  if (p.pin_memory.name.empty())
    p.pin_memory.name = "pin_memory", p.pin_memory.kind = DataLoaderStageKind::kPinMemory;
  if (p.collate.count > 0) p.batch_bytes = static_cast<double>(Find(sums, "collate").bytes) / p.collate.count;
}

// The run over time, stages in the model's order.
void ReadTimeline(const tracer::Trace& main, const std::string& prefix,
                  const std::vector<const tracer::Trace*>& workers, DataLoaderProfile& p) {
  const auto side_by_side = static_cast<uint32_t>(std::max(1, p.settings.num_workers));
  std::vector<internal::DataLoaderTimelineStage> stages;
  for (const DataLoaderStage& s : p.sample_stages) stages.push_back({s.name, side_by_side});
  stages.push_back({p.collate.name, side_by_side});
  stages.push_back({p.transfer.name, 1});
  stages.push_back({p.pin_memory.name, 1});
  p.timeline = internal::MergeDataLoaderTimeline(main, prefix, workers, stages);
  p.trace_seconds = static_cast<double>(main.DurationNs()) / 1e9;
}

// Where the training loop ran, on the timeline. It began when its first
// epoch's iterator was asked for (ReadEpochs); without that span (sampled
// away), at its first recorded wait for a batch, or else between the last
// snapshot before its first batch and the one that counted it: the earlier
// is taken. It ended with its last step: no earlier than its waits and
// steps after its start, nor than the last step recorded as a span; no
// later than the first snapshot holding the loop's totals.
void ReadLoopSpan(const tracer::Trace& main, const std::string& prefix, DataLoaderProfile& p) {
  const std::vector<Frame>& frames = p.timeline.frames;
  if (frames.empty()) return;
  tracer::StageId next = tracer::kInvalidStage, step = tracer::kInvalidStage;
  for (const tracer::StageDef& stage : main.stages) {
    if (stage.name == prefix + "next") next = stage.id;
    if (stage.name == prefix + "step") step = stage.id;
  }
  auto seconds = [&](uint64_t ns) {
    return ns > main.header.clock.start_ns ? (ns - main.header.clock.start_ns) / 1e9 : 0.0;
  };
  if (p.loop_begin_seconds <= 0) {
    double begin = std::numeric_limits<double>::infinity();
    for (size_t i = 1; i < frames.size(); ++i) {
      if (frames[i].steps == 0) continue;
      begin = static_cast<double>(frames[i - 1].time_ns) / 1e9;
      break;
    }
    for (const tracer::SpanRecord& span : main.spans) {
      if (span.stage == next) begin = std::min(begin, seconds(span.begin_ns));
    }
    if (std::isfinite(begin)) p.loop_begin_seconds = begin;
  }
  double end = p.loop_begin_seconds + p.iterator_seconds + p.wait_seconds + p.step_seconds;
  for (const tracer::SpanRecord& span : main.spans) {
    if (span.stage == step) end = std::max(end, seconds(span.end_ns));
  }
  const Frame& last = frames.back();
  for (const Frame& f : frames) {
    if (f.steps != last.steps || f.step_busy_ns != last.step_busy_ns) continue;
    end = std::min(end, static_cast<double>(f.time_ns) / 1e9);
    break;
  }
  p.loop_end_seconds = std::max(end, p.loop_begin_seconds);
}

// The program's CPU (every thread's, user + system, less the recorder's:
// ProgramCpuSeconds) at `seconds` after its session started, interpolated
// between its process samples; nullopt outside them.
std::optional<double> ProcessCpuAt(const tracer::Trace& main, double seconds) {
  const std::vector<tracer::ProcessSample>& samples = main.process_samples;
  auto at = [&](const tracer::ProcessSample& s) {
    return s.time_ns > main.header.clock.start_ns ? (s.time_ns - main.header.clock.start_ns) / 1e9 : 0.0;
  };
  for (size_t i = 1; i < samples.size(); ++i) {
    const double t0 = at(samples[i - 1]), t1 = at(samples[i]);
    if (seconds < t0 || seconds > t1) continue;
    const double c0 = ProgramCpuSeconds(samples[i - 1]), c1 = ProgramCpuSeconds(samples[i]);
    return t1 > t0 ? c0 + (c1 - c0) * (seconds - t0) / (t1 - t0) : c1;
  }
  return std::nullopt;
}

// The CPU of the threads the training step runs beside the loop's own
// (DataLoaderProfile::step_threads_cpu_seconds_each): the process's CPU
// over the loop less what the recorder timed on the loop's thread (its
// steps, its waits in next() with the samples loaded there, its iterators)
// and on the pin thread. The recorder times only the loop's thread, so a
// step on the CPU whose operators run on torch's intra-op pool read as one
// core where the process used 1.8 of 2 (issue 39).
//
// Not the step's: the samples' stages where fetch threads ran them at
// num_workers=0 (timed on those threads; counted here too, a trace at
// 0 x 16 on a store 25 ms away priced each step 34 ms of CPU it never
// used), and the recorder's own threads (the GIL probe and the sampler each
// record their CPU, taken out). Threads of the program that run over the
// whole loop rather than with each step (a watcher polling /proc, a
// logger) count only above the floor below.
void ReadStepThreads(const tracer::Trace& main, const std::map<std::string, StageSum>& main_stages,
                     DataLoaderProfile& p) {
  // Below this share of a core over the loop, or the process clock's ticks
  // at both ends of the loop (10 ms each, /proc/self/stat), the rest is
  // rounding and threads that run over the loop, not threads of the step.
  // Over the loop, not the steps: the slow-store bench's script polls /proc
  // for its peak memory every 50 ms, 3% of a core, which over 20 steps of
  // 0.12 ms (a 25 ms wait for each batch) was priced 13.6 ms a step.
  constexpr double kStepThreadsMinCores = 0.05;
  constexpr double kProcessCpuResolutionSeconds = 0.02;
  if (p.step.count == 0 || p.step_seconds <= 0 || p.step.cpu_seconds_each < 0) return;
  const std::optional<double> begin = ProcessCpuAt(main, p.loop_begin_seconds);
  const std::optional<double> end = ProcessCpuAt(main, p.loop_end_seconds);
  if (!begin || !end) return;
  double timed = 0;
  for (const char* name : {"step", "next", "epoch"}) timed += Find(main_stages, name).cpu_ns / 1e9;
  // Without workers torch pins in next(), on the loop's thread: timed there.
  if (p.settings.num_workers > 0) timed += Find(main_stages, "pin_memory").cpu_ns / 1e9;
  if (p.settings.num_workers == 0) {
    if (p.settings.fetch_threads > 1) {
      for (const auto& [name, sum] : main_stages) {
        const bool sample_stage = IsDataStage(name) && (KindOf(name) == DataLoaderStageKind::kLoad ||
                                                        KindOf(name) == DataLoaderStageKind::kTransform);
        if (sample_stage) timed += sum.cpu_ns / 1e9;
      }
    }
    timed += p.gil_probe.cpu_seconds;  // the main process's own probe
  }
  const double beside = std::max(0.0, *end - *begin - timed);
  const double loop_seconds = std::max(p.step_seconds, p.loop_end_seconds - p.loop_begin_seconds);
  p.step_threads_cpu_seconds_each =
      beside >= kStepThreadsMinCores * loop_seconds + kProcessCpuResolutionSeconds
          ? beside / static_cast<double>(p.step.count)
          : 0.0;
}

}  // namespace

bool LoadingShareMeansSharedHost(double loading_cpu_share, int num_workers, double cores) {
  // More workers than cores share them among themselves: each then gets
  // cores / workers of one, which is the run's own doing, not other programs'.
  const double loaders = std::max(1, num_workers);
  const double own_share = cores > 0 ? std::min(1.0, cores / loaders) : 1.0;
  return loading_cpu_share > 0 && loading_cpu_share < kSharedHostShare * own_share;
}

bool RunDelayMeansContention(double run_delay_seconds, double off_cpu_seconds) {
  return run_delay_seconds >= 0 && run_delay_seconds >= kContentionShareOfOffCpu * off_cpu_seconds;
}

StatusOr<DataLoaderProfile> MakeDataLoaderProfile(const tracer::Trace& main,
                                                  const std::vector<tracer::Trace>& workers) {
  const std::string& path = main.report.path;
  Json record = internal::RecordOf(main.header.pipeline);
  PIPETUNE_RETURN_IF_ERROR(internal::CheckMainRecord(record, path));
  uint64_t batches = 0;
  const Json* chosen = ChooseLoader(record["loaders"], main, &batches);
  if (batches == 0) {
    return InvalidInput(
        fmt::format("{}: stage \"dataloader\": the program took no batch from a DataLoader", path));
  }
  DataLoaderProfile p = DescribeDataLoaderProcess(main);
  p.cuda_available = internal::Get<bool>(record, "cuda_available", false);
  if (!main.report.warning.empty()) p.warnings.push_back(main.report.warning);
  p.settings = internal::ReadSettings(chosen->value("settings", Json::object()));
  p.dataset = internal::ReadDataset(*chosen);
  const int loader_id = internal::Get<int>(*chosen, "id", 0);
  const std::string prefix = LoaderPrefix(loader_id);

  // The main process's stages of this DataLoader: its consumer; its samples
  // when it has no workers, the transfer and pinning when it has.
  std::map<std::string, StageSum> main_stages = StagesOf(main, prefix);
  ReadConsumer(main_stages, p);
  std::map<std::string, StageSum> sums;
  StageSum main_data;  // the samples' stages and collate at num_workers=0
  for (const auto& [name, sum] : main_stages) {
    if (!IsDataStage(name) || sum.count == 0) continue;
    if (name != "transfer" && name != "pin_memory") {
      main_data.work_ns += sum.work_ns;
      main_data.cpu_ns += sum.cpu_ns;
    }
    sums[name] = sum;
  }
  uint64_t worker_data_ns = 0;
  std::vector<WorkerStart> starts;
  std::vector<const tracer::Trace*> used;
  for (const tracer::Trace& w : workers) {
    Json wr = internal::RecordOf(w.header.pipeline);
    if (wr.is_null() || internal::Get<std::string>(wr, "role", "") != "worker") continue;
    int for_loader = internal::Get<int>(wr, "loader", 0);
    if (for_loader != 0 && for_loader != loader_id) continue;
    ++p.worker_traces;
    used.push_back(&w);
    if (!w.report.warning.empty()) p.warnings.push_back(w.report.warning);
    for (const auto& [name, sum] : StagesOf(w, "")) {
      if (!IsDataStage(name) || sum.count == 0) continue;
      StageSum& total = sums[name];
      total.count += sum.count;
      total.work_ns += sum.work_ns;
      total.cpu_ns += sum.cpu_ns;
      total.bytes += sum.bytes;
      worker_data_ns += sum.work_ns;
    }
    p.worker_rss_bytes = std::max(p.worker_rss_bytes, PeakRss(w));
    if (internal::Get<bool>(wr, "sharded_by_worker_info", false)) ++p.sharded_workers;
    internal::AddGilProbe(wr, p.gil_probe);
    starts.push_back(
        {internal::Get<uint64_t>(wr, "start_ns", 0), internal::Get<uint64_t>(wr, "ready_ns", 0)});
  }
  p.sharded_by_worker_info = p.worker_traces > 0 && p.sharded_workers == p.worker_traces;
  // The main process's probe tells of its own fetches: this DataLoader's
  // when it had no workers.
  if (p.settings.num_workers == 0) internal::AddGilProbe(record, p.gil_probe);
  PlaceStages(sums, p);
  p.main_rss_bytes = PeakRss(main);
  ReadCpuShares(main, used, main_data, worker_data_ns, p);
  ReadEpochs(main, prefix, Find(main_stages, "epoch").count, starts, p);
  ReadTimeline(main, prefix, used, p);
  ReadLoopSpan(main, prefix, p);
  ReadStepThreads(main, main_stages, p);
  return p;
}

StatusOr<DataLoaderTraces> LoadDataLoaderTraces(const std::string& main_trace) {
  std::vector<std::string> paths = DataLoaderTracePaths(main_trace);
  StatusOr<tracer::Trace> main = tracer::LoadTrace(paths[0]);
  if (!main.ok()) return main.status();
  DataLoaderTraces traces;
  traces.main = std::move(*main);
  for (size_t i = 1; i < paths.size(); ++i) {
    StatusOr<tracer::Trace> w = tracer::LoadTrace(paths[i]);
    if (!w.ok()) {
      traces.skipped.push_back(w.status().message());
      continue;
    }
    traces.workers.push_back(std::move(*w));
  }
  return traces;
}

StatusOr<DataLoaderProfile> ReadDataLoaderProfile(const std::string& main_trace) {
  PIPETUNE_ASSIGN_OR_RETURN(DataLoaderTraces traces, LoadDataLoaderTraces(main_trace));
  StatusOr<DataLoaderProfile> profile = MakeDataLoaderProfile(traces.main, traces.workers);
  if (profile.ok()) {
    for (const std::string& u : traces.skipped) profile->warnings.push_back("skipped a worker's trace: " + u);
  }
  return profile;
}

}  // namespace pipetune::analyzer

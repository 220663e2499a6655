// Stages, workers, consumer threads and GPU records: registration, the
// sampler's collection of them, and the rare-path functions of tracer.h.
#include "registry.h"

#include <pthread.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <new>
#include <optional>

#include "pipetune/base/check.h"
#include "pipetune/base/clock.h"

namespace pipetune::tracer {
namespace internal {

std::atomic<bool> g_enabled{false};

Totals& Totals::operator+=(const Totals& o) {
  StageCounts::operator+=(o);
  cpu_ns += o.cpu_ns;
  spans_dropped += o.spans_dropped;
  return *this;
}

void Tick::Clear() {
  time_ns = 0;
  pipeline_infos.clear();
  new_stages.clear();
  new_workers.clear();
  snapshots.clear();
  consumer = {};
  process = {};
  drops = {};
  spans.clear();
  steps.clear();
  gpu.clear();
  has_gpu_status = false;
}

// The friend of Worker: creates workers and reads their counters and rings.
struct WorkerAccess {
  static Worker* Create(StageId stage, uint32_t index, RateGate* gate, StageState* state,
                        WorkerCounters* counters) {
    return new Worker(stage, index, gate, state, counters);
  }
  static StageState* State(const Worker& w) { return w.state_; }
  // What the worker of `entry` counted since it attached.
  static Totals Read(const WorkerEntry& entry) {
    Totals t;
    static_cast<StageCounts&>(t) = entry.worker->counters().Load().Since(entry.at_attach);
    t.spans_dropped = entry.worker->spans_dropped_.load(std::memory_order_relaxed);
    return t;
  }
  // The CPU time the worker reported (WorkCpu) into *cpu_ns; false when it
  // reports none, and its thread's CPU clock counts instead.
  static bool ReportedCpu(const Worker& w, uint64_t* cpu_ns) {
    if (!w.reports_cpu_.load(std::memory_order_relaxed)) return false;
    *cpu_ns = w.reported_cpu_ns_.load(std::memory_order_relaxed);
    return true;
  }
  // Moves the worker's ring into `out` (or counts them in *dropped when out
  // is null or at its cap). Only the sampler side calls this, under the lock.
  static size_t Drain(Worker& w, std::vector<SpanRecord>* out, size_t cap, uint64_t* dropped) {
    uint64_t head = w.span_head_.load(std::memory_order_acquire);
    uint64_t tail = w.span_tail_.load(std::memory_order_relaxed);
    size_t taken = 0;
    for (; tail != head; ++tail) {
      const Worker::SpanSlot& s = w.spans_[tail % Worker::kSpanRing];
      if (out != nullptr && out->size() < cap) {
        out->push_back(SpanRecord{w.stage_, w.index_, s.element_id, s.begin_ns, s.end_ns});
        ++taken;
      } else if (dropped != nullptr) {
        ++*dropped;
      }
    }
    w.span_tail_.store(head, std::memory_order_release);
    return taken;
  }
};

namespace {

constexpr uint32_t kConsumerRing = 1024;

uint64_t Minus(uint64_t a, uint64_t b) { return a > b ? a - b : 0; }

// One consumer thread's counters and step ring; same ownership rules as a
// Worker's (the thread writes, the sampler reads and drains).
struct ConsumerSlot {
  struct Step {
    uint64_t wait_ns, step_ns, end_ns;
  };
  uint32_t index = 0;
  std::atomic<uint64_t> steps{0}, wait_ns{0}, step_ns{0}, dropped{0}, head{0};
  alignas(64) std::atomic<uint64_t> tail{0};
  alignas(64) Step ring[kConsumerRing];
};

struct ConsumerCounts {
  uint64_t steps = 0, wait_ns = 0, step_ns = 0, dropped = 0;
  void Add(const ConsumerSlot& s) {
    steps += s.steps.load(std::memory_order_relaxed);
    wait_ns += s.wait_ns.load(std::memory_order_relaxed);
    step_ns += s.step_ns.load(std::memory_order_relaxed);
    dropped += s.dropped.load(std::memory_order_relaxed);
  }
};

struct Registry {
  std::mutex mu;
  // Stage lookup without the lock (SetBufferOccupancy is per element): slots
  // are published once, with release, and never change or go away.
  std::atomic<StageState*> stages[kMaxStages] = {};
  std::atomic<uint32_t> stage_count{0};

  // Everything below is guarded by mu.
  uint32_t next_worker_index = 0;
  uint32_t next_consumer_index = 0;
  bool session_active = false;
  uint32_t session_spans_per_second = 0;  // for stages registered mid-session
  std::vector<WorkerDef> pending_worker_defs;
  std::vector<PipelineInfo> pending_pipeline_infos;
  std::vector<SpanRecord> orphan_spans;  // from workers detached since the last tick
  uint64_t finished_spans_dropped = 0;   // of stages finished in this session

  std::vector<ConsumerSlot*> consumers;
  ConsumerCounts consumers_detached;
  ConsumerCounts consumers_baseline;
  std::vector<ConsumerStepRecord> orphan_steps;
  uint64_t steps_recorded = 0;

  std::vector<GpuActivity> gpu_pending;
  uint64_t gpu_dropped = 0;
  bool has_gpu_status = false;      // kept across sessions: the source's state outlives them
  bool gpu_status_pending = false;  // to be written with the next tick
  GpuStatus gpu_status;
  std::atomic<uint64_t> gpu_dropped_at_source{0};
  uint64_t gpu_dropped_at_source_baseline = 0;
};

Registry& GetRegistry() {
  // Never destroyed: workers and the atexit Stop() may outlive static
  // destructors.
  static Registry* registry = [] {
    auto* r = new Registry;
    InstallForkHandlers();
    return r;
  }();
  return *registry;
}

RateGate g_closed_gate;  // for workers of kInvalidStage: never samples
// Outside Registry so that ConsumerStep reaches it without GetRegistry()'s
// initialisation guard.
RateGate g_consumer_gate;

StageState* FindStage(StageId id) {
  if (id >= kMaxStages) return nullptr;
  return GetRegistry().stages[id].load(std::memory_order_acquire);
}

void OpenGate(RateGate& gate, uint32_t per_second) {
  if (per_second == 0) {
    gate.next_ns.store(~uint64_t{0}, std::memory_order_relaxed);
    return;
  }
  gate.interval_ns.store(std::max<uint64_t>(1, 1000000000u / per_second), std::memory_order_relaxed);
  gate.burst_ns.store(kBurstNs, std::memory_order_relaxed);
  gate.next_ns.store(0, std::memory_order_relaxed);
}

// A stage's totals now, live workers read in place. Under mu.
Totals StageTotalsNow(StageState& stage) {
  Totals t = stage.detached;
  for (WorkerEntry& e : stage.workers) {
    Totals w = WorkerAccess::Read(e);
    if (!WorkerAccess::ReportedCpu(*e.worker, &w.cpu_ns)) {
      if (std::optional<uint64_t> cpu = ReadClockNs(e.cpu_clock))
        e.last_cpu_ns = Minus(*cpu, e.cpu_at_attach_ns);
      w.cpu_ns = e.last_cpu_ns;
    }
    t += w;
  }
  return t;
}

StageSnapshot Snapshot(StageState& stage, uint64_t time_ns) {
  Totals now = StageTotalsNow(stage);
  const Totals& b = stage.baseline;
  StageSnapshot s;
  s.time_ns = time_ns;
  s.stage = stage.id;
  s.parallelism = stage.parallelism.load(std::memory_order_relaxed);
  s.live_workers = static_cast<uint32_t>(stage.workers.size());
  static_cast<StageCounts&>(s) = now.Since(b);
  s.cpu_ns = Minus(now.cpu_ns, b.cpu_ns);
  s.occupancy_elements = stage.occupancy_elements.load(std::memory_order_relaxed);
  s.occupancy_bytes = stage.occupancy_bytes.load(std::memory_order_relaxed);
  s.epoch_elements = stage.epoch_elements.load(std::memory_order_relaxed);
  s.spans_recorded = stage.spans_recorded;
  s.spans_dropped = Minus(now.spans_dropped, b.spans_dropped);
  return s;
}

ConsumerCounts ConsumerCountsNow(const Registry& r) {
  ConsumerCounts c = r.consumers_detached;
  for (const ConsumerSlot* s : r.consumers) c.Add(*s);
  return c;
}

// Moves a consumer ring into `out` up to `cap`, counting the rest in *dropped.
size_t DrainSteps(ConsumerSlot& s, std::vector<ConsumerStepRecord>* out, size_t cap, uint64_t* dropped) {
  uint64_t head = s.head.load(std::memory_order_acquire);
  uint64_t tail = s.tail.load(std::memory_order_relaxed);
  size_t taken = 0;
  for (; tail != head; ++tail) {
    const ConsumerSlot::Step& step = s.ring[tail % kConsumerRing];
    if (out != nullptr && out->size() < cap) {
      out->push_back(ConsumerStepRecord{s.index, step.wait_ns, step.step_ns, step.end_ns});
      ++taken;
    } else if (dropped != nullptr) {
      ++*dropped;
    }
  }
  s.tail.store(head, std::memory_order_release);
  return taken;
}

void RetireConsumer(ConsumerSlot* slot) {
  Registry& r = GetRegistry();
  {
    std::lock_guard<std::mutex> lock(r.mu);
    ConsumerCounts final_counts;
    final_counts.Add(*slot);
    uint64_t lost = 0;
    size_t taken = DrainSteps(*slot, r.session_active ? &r.orphan_steps : nullptr, kMaxOrphanRecords, &lost);
    r.steps_recorded += taken;
    final_counts.dropped += r.session_active ? lost : 0;
    r.consumers_detached.steps += final_counts.steps;
    r.consumers_detached.wait_ns += final_counts.wait_ns;
    r.consumers_detached.step_ns += final_counts.step_ns;
    r.consumers_detached.dropped += final_counts.dropped;
    r.consumers.erase(std::remove(r.consumers.begin(), r.consumers.end(), slot), r.consumers.end());
  }
  delete slot;
}

// The calling thread's consumer slot. The plain pointer is what each step
// reads (a trivial thread_local needs no initialisation check); the holder,
// touched once per thread, retires the slot when the thread exits.
thread_local ConsumerSlot* t_consumer_slot = nullptr;
struct ConsumerHolder {
  ConsumerSlot* slot = nullptr;
  ~ConsumerHolder() {
    if (slot != nullptr) RetireConsumer(slot);
    t_consumer_slot = nullptr;
  }
};
thread_local ConsumerHolder t_consumer_holder;

ConsumerSlot* AttachConsumer() {
  auto* slot = new (std::nothrow) ConsumerSlot;
  if (slot == nullptr) return nullptr;
  Registry& r = GetRegistry();
  std::lock_guard<std::mutex> lock(r.mu);
  slot->index = r.next_consumer_index++;
  r.consumers.push_back(slot);
  return slot;
}

void AddRelaxed(std::atomic<uint64_t>& counter, uint64_t delta) {
  counter.store(counter.load(std::memory_order_relaxed) + delta, std::memory_order_relaxed);
}

}  // namespace

void RecordConsumerStep(uint64_t wait_ns, uint64_t step_ns, uint64_t end_ns) noexcept {
  ConsumerSlot* s = t_consumer_slot;
  if (s == nullptr) {
    s = AttachConsumer();  // once per thread: the only allocation here
    if (s == nullptr) return;
    t_consumer_holder.slot = s;
    t_consumer_slot = s;
  }
  AddRelaxed(s->steps, 1);
  AddRelaxed(s->wait_ns, wait_ns);
  AddRelaxed(s->step_ns, step_ns);
  uint64_t begin = Minus(end_ns, wait_ns + step_ns);
  if (!g_consumer_gate.TryAcquire(begin)) return;
  uint64_t head = s->head.load(std::memory_order_relaxed);
  if (head - s->tail.load(std::memory_order_acquire) >= kConsumerRing) {
    AddRelaxed(s->dropped, 1);
    return;
  }
  s->ring[head % kConsumerRing] = ConsumerSlot::Step{wait_ns, step_ns, end_ns};
  s->head.store(head + 1, std::memory_order_release);
}

void BeginSession(const SessionOptions& options) {
  Registry& r = GetRegistry();
  std::lock_guard<std::mutex> lock(r.mu);
  r.session_active = true;
  r.session_spans_per_second = options.spans_per_stage_per_second;
  r.pending_worker_defs.clear();
  r.pending_pipeline_infos.clear();
  r.orphan_spans.clear();
  r.orphan_steps.clear();
  r.finished_spans_dropped = 0;
  uint32_t count = r.stage_count.load(std::memory_order_acquire);
  for (uint32_t id = 0; id < count; ++id) {
    StageState* stage = r.stages[id].load(std::memory_order_acquire);
    if (stage == nullptr) continue;
    // A stage retired before the session is not part of it.
    stage->finished = stage->retired.load(std::memory_order_relaxed);
    stage->announced = stage->finished;
    stage->spans_recorded = 0;
    stage->baseline = StageTotalsNow(*stage);
    OpenGate(stage->gate, options.spans_per_stage_per_second);
    for (WorkerEntry& e : stage->workers) {
      WorkerAccess::Drain(*e.worker, nullptr, 0, nullptr);  // spans of an earlier session
      if (!stage->finished) r.pending_worker_defs.push_back(e.def);
    }
  }
  r.consumers_baseline = ConsumerCountsNow(r);
  r.steps_recorded = 0;
  for (ConsumerSlot* s : r.consumers) DrainSteps(*s, nullptr, 0, nullptr);
  OpenGate(g_consumer_gate, options.consumer_steps_per_second);
  r.gpu_pending.clear();
  r.gpu_dropped = 0;
  r.gpu_dropped_at_source_baseline = r.gpu_dropped_at_source.load(std::memory_order_relaxed);
  r.gpu_status_pending = r.has_gpu_status;  // each session's trace says where GPU activity stands
}

void CollectTick(Tick* tick) {
  Registry& r = GetRegistry();
  std::lock_guard<std::mutex> lock(r.mu);
  tick->time_ns = NowNs();
  tick->pipeline_infos.swap(r.pending_pipeline_infos);
  r.pending_pipeline_infos.clear();

  uint64_t spans_dropped = r.finished_spans_dropped;
  tick->spans.swap(r.orphan_spans);
  r.orphan_spans.clear();
  uint32_t count = r.stage_count.load(std::memory_order_acquire);
  for (uint32_t id = 0; id < count; ++id) {
    StageState* stage = r.stages[id].load(std::memory_order_acquire);
    if (stage == nullptr || stage->finished) continue;
    if (!stage->announced) {
      tick->new_stages.push_back(
          StageDef{stage->id, stage->name, stage->op, stage->parallelism.load(std::memory_order_relaxed)});
      stage->announced = true;
    }
    for (WorkerEntry& e : stage->workers) {
      uint64_t lost = 0;
      stage->spans_recorded += WorkerAccess::Drain(*e.worker, &tick->spans, SIZE_MAX, &lost);
    }
    StageSnapshot snapshot = Snapshot(*stage, tick->time_ns);
    spans_dropped += snapshot.spans_dropped;
    tick->snapshots.push_back(snapshot);
    if (stage->retired.load(std::memory_order_relaxed)) {
      stage->finished = true;
      r.finished_spans_dropped += snapshot.spans_dropped;
    }
  }
  tick->new_workers.swap(r.pending_worker_defs);
  r.pending_worker_defs.clear();

  tick->steps.swap(r.orphan_steps);
  r.orphan_steps.clear();
  for (ConsumerSlot* s : r.consumers) r.steps_recorded += DrainSteps(*s, &tick->steps, SIZE_MAX, nullptr);
  ConsumerCounts c = ConsumerCountsNow(r);
  const ConsumerCounts& b = r.consumers_baseline;
  tick->consumer = ConsumerTotals{
      tick->time_ns,    Minus(c.steps, b.steps),    Minus(c.wait_ns, b.wait_ns), Minus(c.step_ns, b.step_ns),
      r.steps_recorded, Minus(c.dropped, b.dropped)};

  tick->gpu.swap(r.gpu_pending);
  r.gpu_pending.clear();
  if (r.gpu_status_pending) {
    tick->has_gpu_status = true;
    tick->gpu_status = r.gpu_status;
    tick->gpu_status.time_ns = tick->time_ns;
    r.gpu_status_pending = false;
  }
  tick->drops.time_ns = tick->time_ns;
  tick->drops.spans = spans_dropped;
  tick->drops.consumer_steps = tick->consumer.steps_dropped;
  tick->drops.gpu_records = r.gpu_dropped;
  tick->drops.gpu_records_at_source =
      Minus(r.gpu_dropped_at_source.load(std::memory_order_relaxed), r.gpu_dropped_at_source_baseline);
}

void EndSession() {
  Registry& r = GetRegistry();
  std::lock_guard<std::mutex> lock(r.mu);
  r.session_active = false;
  r.pending_worker_defs.clear();
  r.pending_pipeline_infos.clear();
  r.orphan_spans.clear();
  r.orphan_steps.clear();
  r.gpu_pending.clear();
}

void QueuePipelineInfo(const PipelineInfo& info) {
  Registry& r = GetRegistry();
  std::lock_guard<std::mutex> lock(r.mu);
  if (r.session_active) r.pending_pipeline_infos.push_back(info);
}

void InstallForkHandlers() {
  // Called from GetRegistry()'s initializer; the handlers run at fork time,
  // when the registry exists.
  pthread_atfork([] { GetRegistry().mu.lock(); }, [] { GetRegistry().mu.unlock(); },
                 [] {
                   // The child has no session (session.cc's handler), so it
                   // must not queue records for one.
                   GetRegistry().session_active = false;
                   GetRegistry().mu.unlock();
                 });
}

void AutoStartFromEnvironment();  // session.cc

namespace {
// PIPETUNE_TRACE starts tracing before main() in every program that links the
// tracer. It lives in this file because every instrumented program links it
// (Enabled() reads g_enabled, defined above).
struct AutoStart {
  AutoStart() { AutoStartFromEnvironment(); }
} g_auto_start;
}  // namespace

}  // namespace internal

using internal::GetRegistry;
using internal::Registry;
using internal::StageState;

StageId RegisterStage(const StageInfo& info) {
  Registry& r = GetRegistry();
  std::lock_guard<std::mutex> lock(r.mu);
  uint32_t id = r.stage_count.load(std::memory_order_relaxed);
  if (id >= internal::kMaxStages) return kInvalidStage;
  auto* stage = new StageState(id, info);
  // A stage registered during a session samples with the session's budget;
  // before one, the gate stays closed until BeginSession opens it.
  if (r.session_active) internal::OpenGate(stage->gate, r.session_spans_per_second);
  r.stages[id].store(stage, std::memory_order_release);
  r.stage_count.store(id + 1, std::memory_order_release);
  return id;
}

void RetireStage(StageId id) {
  if (StageState* stage = internal::FindStage(id)) stage->retired.store(true, std::memory_order_relaxed);
}

void SetParallelism(StageId id, uint32_t parallelism) {
  if (StageState* stage = internal::FindStage(id)) {
    stage->parallelism.store(parallelism, std::memory_order_relaxed);
  }
}

void SetBufferOccupancy(StageId id, int64_t elements, int64_t bytes) {
  if (StageState* stage = internal::FindStage(id)) {
    stage->occupancy_elements.store(elements, std::memory_order_relaxed);
    stage->occupancy_bytes.store(bytes, std::memory_order_relaxed);
  }
}

void SetEpochElements(StageId id, uint64_t elements) {
  if (StageState* stage = internal::FindStage(id))
    stage->epoch_elements.store(elements, std::memory_order_relaxed);
}

Worker* AttachWorker(StageId id, WorkerCounters* counters) {
  Registry& r = GetRegistry();
  StageState* stage = internal::FindStage(id);
  internal::WorkerEntry entry;
  pthread_getcpuclockid(pthread_self(), &entry.cpu_clock);
  entry.cpu_at_attach_ns = ThreadCpuNs();
  entry.def.stage = stage != nullptr ? id : kInvalidStage;
  entry.def.os_tid = static_cast<uint32_t>(syscall(SYS_gettid));
  entry.def.attach_ns = NowNs();
  std::lock_guard<std::mutex> lock(r.mu);
  entry.def.worker = r.next_worker_index++;
  Worker* worker = internal::WorkerAccess::Create(entry.def.stage, entry.def.worker,
                                                  stage != nullptr ? &stage->gate : &internal::g_closed_gate,
                                                  stage, counters);
  entry.worker = worker;
  entry.at_attach = worker->counters().Load();
  if (stage != nullptr) {
    stage->workers.push_back(entry);
    if (r.session_active && !stage->finished) r.pending_worker_defs.push_back(entry.def);
  }
  return worker;
}

void DetachWorker(Worker* worker) {
  if (worker == nullptr) return;
  const std::optional<uint64_t> cpu_now = ReadClockNs(CLOCK_THREAD_CPUTIME_ID);
  StageState* stage = internal::WorkerAccess::State(*worker);
  if (stage != nullptr) {
    Registry& r = GetRegistry();
    std::lock_guard<std::mutex> lock(r.mu);
    auto it = std::find_if(stage->workers.begin(), stage->workers.end(),
                           [&](const internal::WorkerEntry& e) { return e.worker == worker; });
    PIPETUNE_CHECK(it != stage->workers.end());
    internal::Totals final_totals = internal::WorkerAccess::Read(*it);
    if (!internal::WorkerAccess::ReportedCpu(*worker, &final_totals.cpu_ns)) {
      final_totals.cpu_ns = cpu_now ? internal::Minus(*cpu_now, it->cpu_at_attach_ns) : it->last_cpu_ns;
    }
    // Spans still in the ring wait for the next tick; beyond the cap they are
    // drops like any other.
    uint64_t lost = 0;
    stage->spans_recorded += internal::WorkerAccess::Drain(
        *worker, r.session_active ? &r.orphan_spans : nullptr, internal::kMaxOrphanRecords, &lost);
    final_totals.spans_dropped += lost;
    stage->detached += final_totals;
    stage->workers.erase(it);
  }
  delete worker;
}

void RecordGpuActivity(const GpuActivity& activity) {
  if (!Enabled()) return;
  Registry& r = GetRegistry();
  std::lock_guard<std::mutex> lock(r.mu);
  if (!r.session_active) return;
  if (r.gpu_pending.size() >= internal::kMaxGpuPending) {
    ++r.gpu_dropped;
    return;
  }
  r.gpu_pending.push_back(activity);
  if (r.gpu_pending.back().name.size() > internal::kMaxGpuNameBytes) {
    r.gpu_pending.back().name.resize(internal::kMaxGpuNameBytes);
  }
}

void RecordGpuStatus(const GpuStatus& status) {
  Registry& r = GetRegistry();
  std::lock_guard<std::mutex> lock(r.mu);
  r.has_gpu_status = true;
  r.gpu_status = status;
  r.gpu_status_pending = r.session_active;
}

void RecordGpuDrops(uint64_t records) {
  GetRegistry().gpu_dropped_at_source.fetch_add(records, std::memory_order_relaxed);
}

}  // namespace pipetune::tracer

// The C API: thin wrappers over tracer.h. Errors become -1 plus a
// thread-local message, since C callers have no Status.
#include "pipetune/tracer/tracer_c.h"

#include <cstdint>
#include <string>

#include "pipetune/tracer/tracer.h"

namespace {

using namespace pipetune::tracer;

thread_local std::string t_last_error;

int Report(const pipetune::Status& status) {
  if (status.ok()) {
    t_last_error.clear();
    return 0;
  }
  t_last_error = status.message();
  return -1;
}

std::string OrEmpty(const char* s) { return s != nullptr ? s : ""; }

// pipetune_worker is never defined: the pointer is a Worker*.
Worker* AsWorker(pipetune_worker* w) { return reinterpret_cast<Worker*>(w); }

}  // namespace

extern "C" {

void pipetune_session_options_init(pipetune_session_options* options) {
  SessionOptions defaults;
  options->path = nullptr;
  options->pipeline_name = nullptr;
  options->config_json = nullptr;
  options->snapshot_interval_ms = defaults.snapshot_interval_ms;
  options->spans_per_stage_per_second = defaults.spans_per_stage_per_second;
  options->consumer_steps_per_second = defaults.consumer_steps_per_second;
}

int pipetune_trace_start(const pipetune_session_options* options) {
  if (options == nullptr) return Report(pipetune::InvalidInput("options is NULL"));
  SessionOptions o;
  o.path = OrEmpty(options->path);
  o.pipeline_name = OrEmpty(options->pipeline_name);
  o.config_json = OrEmpty(options->config_json);
  o.snapshot_interval_ms = options->snapshot_interval_ms;
  o.spans_per_stage_per_second = options->spans_per_stage_per_second;
  o.consumer_steps_per_second = options->consumer_steps_per_second;
  return Report(Start(o));
}

int pipetune_trace_start_from_environment(void) { return Report(StartFromEnvironment()); }
int pipetune_trace_stop(void) { return Report(Stop()); }
int pipetune_trace_enabled(void) { return Enabled() ? 1 : 0; }

void pipetune_trace_set_pipeline_info(const char* pipeline_name, const char* config_json) {
  SetPipelineInfo(OrEmpty(pipeline_name), OrEmpty(config_json));
}

const char* pipetune_trace_last_error(void) { return t_last_error.c_str(); }

uint64_t pipetune_now_ns(void) { return NowNs(); }

pipetune_stage_id pipetune_register_stage(const char* name, const char* op, uint32_t parallelism) {
  return RegisterStage(StageInfo{OrEmpty(name), OrEmpty(op), parallelism});
}
void pipetune_retire_stage(pipetune_stage_id stage) { RetireStage(stage); }
void pipetune_set_parallelism(pipetune_stage_id stage, uint32_t parallelism) {
  SetParallelism(stage, parallelism);
}
void pipetune_set_buffer_occupancy(pipetune_stage_id stage, int64_t elements, int64_t bytes) {
  SetBufferOccupancy(stage, elements, bytes);
}

pipetune_worker* pipetune_attach_worker(pipetune_stage_id stage) {
  return reinterpret_cast<pipetune_worker*>(AttachWorker(stage));
}
void pipetune_detach_worker(pipetune_worker* worker) { DetachWorker(AsWorker(worker)); }

void pipetune_produced(pipetune_worker* worker, uint64_t elements, uint64_t bytes) {
  AsWorker(worker)->Produced(elements, bytes);
}
void pipetune_consumed(pipetune_worker* worker, uint64_t elements) { AsWorker(worker)->Consumed(elements); }
void pipetune_work(pipetune_worker* worker, uint64_t begin_ns, uint64_t end_ns, uint64_t element_id) {
  AsWorker(worker)->Work(begin_ns, end_ns, element_id);
}
void pipetune_element(pipetune_worker* worker, uint64_t begin_ns, uint64_t end_ns, uint64_t element_id,
                      uint64_t cpu_ns, uint64_t bytes) {
  Worker* w = AsWorker(worker);
  w->Consumed(1);
  w->Work(begin_ns, end_ns, element_id);
  w->WorkCpu(cpu_ns);
  w->Produced(1, bytes);
}
void pipetune_elements(const uint64_t* records, uint64_t count) {
  if (records == nullptr) return;
  for (uint64_t i = 0; i < count; ++i) {
    const uint64_t* r = records + i * PIPETUNE_ELEMENT_FIELDS;
    Worker* w = reinterpret_cast<Worker*>(static_cast<uintptr_t>(r[0]));
    if (w == nullptr) continue;
    w->Consumed(r[5]);
    w->Work(r[1], r[2], r[3]);
    w->WorkCpu(r[4]);
    w->Produced(r[5], r[6]);
  }
}
void pipetune_wait_input(pipetune_worker* worker, uint64_t ns) { AsWorker(worker)->WaitInput(ns); }
void pipetune_wait_output(pipetune_worker* worker, uint64_t ns) { AsWorker(worker)->WaitOutput(ns); }

void pipetune_consumer_step(uint64_t wait_ns, uint64_t step_ns, uint64_t end_ns) {
  ConsumerStep(wait_ns, step_ns, end_ns);
}

void pipetune_record_gpu_activity(const pipetune_gpu_activity* a) {
  if (a == nullptr) return;
  GpuActivity activity;
  activity.kind = static_cast<GpuActivityKind>(a->kind);
  activity.device = a->device;
  activity.stream = a->stream;
  activity.start_ns = a->start_ns;
  activity.end_ns = a->end_ns;
  activity.bytes = a->bytes;
  activity.correlation_id = a->correlation_id;
  activity.name = OrEmpty(a->name);
  RecordGpuActivity(activity);
}

void pipetune_record_gpu_drops(uint64_t records) { RecordGpuDrops(records); }

}  // extern "C"

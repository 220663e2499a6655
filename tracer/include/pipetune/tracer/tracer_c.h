/* The recording API for C and for other languages through their C FFI.
 * The same functions as pipetune/tracer/tracer.h, with plain C types; see
 * there for contracts and costs. Functions returning int return 0 on success
 * and -1 on failure; pipetune_trace_last_error() then says why (per thread).
 *
 * C callers: call pipetune_trace_start_from_environment() once your pipeline
 * is described (pipetune_trace_set_pipeline_info), so that
 * `pipetune profile -- your_program` records its name and config. */
#ifndef PIPETUNE_TRACER_TRACER_C_H_
#define PIPETUNE_TRACER_TRACER_C_H_

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef uint32_t pipetune_stage_id;
#define PIPETUNE_INVALID_STAGE ((pipetune_stage_id)0xffffffffu)

/* Opaque: one worker thread's recorder. */
typedef struct pipetune_worker pipetune_worker;

typedef struct pipetune_session_options {
  const char* path;          /* required */
  const char* pipeline_name; /* may be NULL */
  const char* config_json;   /* may be NULL */
  uint32_t snapshot_interval_ms;
  uint32_t spans_per_stage_per_second;
  uint32_t consumer_steps_per_second;
} pipetune_session_options;

/* Fills *options with the defaults (100 ms, 200 spans, 1000 steps, NULLs). */
void pipetune_session_options_init(pipetune_session_options* options);

int pipetune_trace_start(const pipetune_session_options* options);
int pipetune_trace_start_from_environment(void);
int pipetune_trace_stop(void);
int pipetune_trace_enabled(void);
void pipetune_trace_set_pipeline_info(const char* pipeline_name, const char* config_json);
/* The last failure on this thread; "" when none. Valid until the next call. */
const char* pipetune_trace_last_error(void);

uint64_t pipetune_now_ns(void);

pipetune_stage_id pipetune_register_stage(const char* name, const char* op, uint32_t parallelism);
void pipetune_retire_stage(pipetune_stage_id stage);
void pipetune_set_parallelism(pipetune_stage_id stage, uint32_t parallelism);
void pipetune_set_buffer_occupancy(pipetune_stage_id stage, int64_t elements, int64_t bytes);

pipetune_worker* pipetune_attach_worker(pipetune_stage_id stage);
void pipetune_detach_worker(pipetune_worker* worker);
void pipetune_produced(pipetune_worker* worker, uint64_t elements, uint64_t bytes);
void pipetune_consumed(pipetune_worker* worker, uint64_t elements);
void pipetune_work(pipetune_worker* worker, uint64_t begin_ns, uint64_t end_ns, uint64_t element_id);
/* One element through the stage in one call, for callers whose every FFI
 * call costs (ctypes: about a microsecond): consumed 1; its work ran from
 * begin_ns to end_ns and took cpu_ns of the thread's CPU, measured by the
 * caller (Worker::WorkCpu: from the first such call on, the stage's CPU is
 * what its workers report, not their threads' whole CPU); produced 1 of
 * `bytes`. */
void pipetune_element(pipetune_worker* worker, uint64_t begin_ns, uint64_t end_ns, uint64_t element_id,
                      uint64_t cpu_ns, uint64_t bytes);
/* Several elements in one call, each as pipetune_element with a count:
 * `records` holds `count` records of PIPETUNE_ELEMENT_FIELDS values each,
 * {worker, begin_ns, end_ns, element_id, cpu_ns, elements, bytes}: consumed
 * and produced `elements`, one span. For callers that buffer a sample's
 * records and hand them over together (python/pipetune/_recorder.py): in a
 * busy DataLoader worker one ctypes call costs several microseconds, its
 * code cold beside a sample's image work. Each record's worker must be one
 * the calling thread attached. */
#define PIPETUNE_ELEMENT_FIELDS 7
void pipetune_elements(const uint64_t* records, uint64_t count);
void pipetune_wait_input(pipetune_worker* worker, uint64_t ns);
void pipetune_wait_output(pipetune_worker* worker, uint64_t ns);

void pipetune_consumer_step(uint64_t wait_ns, uint64_t step_ns, uint64_t end_ns);

enum pipetune_gpu_activity_kind { PIPETUNE_GPU_KERNEL = 1, PIPETUNE_GPU_MEMCPY = 2, PIPETUNE_GPU_MEMSET = 3 };
typedef struct pipetune_gpu_activity {
  int kind; /* enum pipetune_gpu_activity_kind */
  uint32_t device;
  uint32_t stream;
  uint64_t start_ns; /* host CLOCK_MONOTONIC */
  uint64_t end_ns;
  uint64_t bytes;
  uint64_t correlation_id;
  const char* name; /* may be NULL */
} pipetune_gpu_activity;

void pipetune_record_gpu_activity(const pipetune_gpu_activity* activity);
void pipetune_record_gpu_drops(uint64_t records);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* PIPETUNE_TRACER_TRACER_C_H_ */

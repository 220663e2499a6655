/* The C API used from C, as a C program would: compiled as C, not C++.
 * pipetune_test_c_api() records a small trace at `path` and returns 0, or
 * writes what went wrong into `error` and returns the failing step. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "pipetune/tracer/tracer_c.h"

int pipetune_test_c_api(const char* path, char* error, size_t error_size);

int pipetune_test_c_api(const char* path, char* error, size_t error_size) {
  pipetune_session_options options;
  pipetune_stage_id stage;
  pipetune_worker* worker;
  pipetune_gpu_activity gpu;
  uint64_t t;
  uint64_t i;
  uint64_t records[4 * PIPETUNE_ELEMENT_FIELDS];
  uint64_t buffered = 0;

  if (pipetune_trace_start(NULL) != -1 || strlen(pipetune_trace_last_error()) == 0) {
    snprintf(error, error_size, "start(NULL) did not fail with a message");
    return 1;
  }
  stage = pipetune_register_stage("c_stage", "map", 2);
  if (stage == PIPETUNE_INVALID_STAGE) {
    snprintf(error, error_size, "register_stage failed");
    return 2;
  }
  pipetune_session_options_init(&options);
  options.path = path;
  options.pipeline_name = "c_pipeline";
  options.config_json = "{\"name\":\"c_pipeline\"}";
  options.snapshot_interval_ms = 10;
  if (pipetune_trace_start(&options) != 0) {
    snprintf(error, error_size, "start: %s", pipetune_trace_last_error());
    return 3;
  }
  if (!pipetune_trace_enabled()) {
    snprintf(error, error_size, "not enabled after start");
    return 4;
  }
  pipetune_set_parallelism(stage, 3);
  pipetune_set_buffer_occupancy(stage, 2, 20);
  worker = pipetune_attach_worker(stage);
  t = pipetune_now_ns();
  for (i = 0; i < 1000; ++i) {
    uint64_t end = pipetune_now_ns();
    pipetune_wait_input(worker, 1);
    if (i % 3 == 0) {
      pipetune_consumed(worker, 1);
      pipetune_work(worker, t, end, i);
      pipetune_produced(worker, 1, 16);
    } else if (i % 3 == 1) {
      pipetune_element(worker, t, end, i, 6, 16);
    } else { /* buffered, handed over four at a time */
      uint64_t* r = records + buffered * PIPETUNE_ELEMENT_FIELDS;
      r[0] = (uint64_t)(uintptr_t)worker;
      r[1] = t;
      r[2] = end;
      r[3] = i;
      r[4] = 6;
      r[5] = 1;
      r[6] = 16;
      if (++buffered == 4) {
        pipetune_elements(records, buffered);
        buffered = 0;
      }
    }
    pipetune_wait_output(worker, 2);
    t = end;
  }
  pipetune_elements(records, buffered);
  pipetune_elements(NULL, 3); /* nothing: a null buffer is ignored */
  pipetune_detach_worker(worker);
  pipetune_consumer_step(100, 200, pipetune_now_ns());
  memset(&gpu, 0, sizeof(gpu));
  gpu.kind = PIPETUNE_GPU_KERNEL;
  gpu.start_ns = t;
  gpu.end_ns = t + 10;
  gpu.name = "c_kernel";
  pipetune_record_gpu_activity(&gpu);
  pipetune_record_gpu_drops(2);
  pipetune_trace_set_pipeline_info("c_pipeline_described", "{}");
  if (pipetune_trace_stop() != 0) {
    snprintf(error, error_size, "stop: %s", pipetune_trace_last_error());
    return 5;
  }
  pipetune_retire_stage(stage);
  return 0;
}

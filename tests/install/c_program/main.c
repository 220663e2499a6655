/* A C program recording its own pipeline through the installed tracer's C
 * API, built with pkg-config (pipetune-tracer.pc) against the shared
 * library: one stage, "c_stage", that handles 20000 elements. */
#include <pipetune/tracer/tracer_c.h>
#include <stdio.h>

int main(void) {
  pipetune_stage_id stage;
  pipetune_worker* worker;
  uint64_t i;
  pipetune_trace_set_pipeline_info("c_pipeline", "{\"name\": \"c_pipeline\"}");
  if (pipetune_trace_start_from_environment() != 0) {
    fprintf(stderr, "c_program: %s\n", pipetune_trace_last_error());
    return 1;
  }
  stage = pipetune_register_stage("c_stage", "map", 1);
  worker = pipetune_attach_worker(stage);
  for (i = 0; i < 20000; ++i) {
    uint64_t begin = pipetune_now_ns();
    pipetune_consumed(worker, 1);
    pipetune_work(worker, begin, pipetune_now_ns(), i);
    pipetune_produced(worker, 1, 8);
  }
  pipetune_detach_worker(worker);
  pipetune_retire_stage(stage);
  if (pipetune_trace_stop() != 0) {
    fprintf(stderr, "c_program: %s\n", pipetune_trace_last_error());
    return 1;
  }
  return 0;
}

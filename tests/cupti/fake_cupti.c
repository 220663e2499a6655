/* A stand-in for libcupti, for the tests: the functions pipetune's loader
 * looks up, with CUDA 13's record layouts (cupti.h). Once activity is
 * enabled, the first flush delivers one kernel and one host-to-device copy,
 * stamped with the registered timestamp callback, and the next drop query
 * reports 3 lost records. FAKE_CUPTI_MODE=conflict makes cuptiSubscribe
 * answer as when another subscriber (Nsight, a framework profiler) holds
 * the process. FAKE_CUPTI_BUSY_US=N makes every flush (the tracer forces
 * one per snapshot) deliver a copy and then a kernel that ran the N
 * microseconds before it: a GPU busy N us per snapshot interval. */
#include <cupti.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static CUpti_BuffersCallbackRequestFunc g_requested;
static CUpti_BuffersCallbackCompleteFunc g_completed;
static CUpti_TimestampCallbackFunc g_timestamp;
static int g_enabled, g_delivered, g_drops_reported;
static size_t g_offsets[2], g_count;

static uint64_t Now(void) {
  if (g_timestamp != NULL) return g_timestamp();
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

CUptiResult CUPTIAPI cuptiGetVersion(uint32_t* version) {
  *version = CUPTI_API_VERSION;
  return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiSubscribe(CUpti_SubscriberHandle* subscriber, CUpti_CallbackFunc callback,
                                    void* data) {
  (void)callback;
  (void)data;
  const char* mode = getenv("FAKE_CUPTI_MODE");
  if (mode != NULL && strcmp(mode, "conflict") == 0) return CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED;
  *subscriber = (CUpti_SubscriberHandle)&g_enabled;
  return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiUnsubscribe(CUpti_SubscriberHandle subscriber) {
  (void)subscriber;
  return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiActivityEnable(CUpti_ActivityKind kind) {
  (void)kind;
  ++g_enabled;
  return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiActivityDisable(CUpti_ActivityKind kind) {
  (void)kind;
  --g_enabled;
  return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiActivityRegisterCallbacks(CUpti_BuffersCallbackRequestFunc requested,
                                                    CUpti_BuffersCallbackCompleteFunc completed) {
  g_requested = requested;
  g_completed = completed;
  return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiActivityRegisterTimestampCallback(CUpti_TimestampCallbackFunc callback) {
  g_timestamp = callback;
  return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiGetTimestamp(uint64_t* timestamp) {
  *timestamp = Now();
  return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiActivityFlushAll(uint32_t flag) {
  (void)flag;
  const char* busy_env = getenv("FAKE_CUPTI_BUSY_US");
  uint64_t busy_ns = busy_env != NULL ? (uint64_t)strtoull(busy_env, NULL, 10) * 1000u : 0;
  if (g_enabled <= 0 || (g_delivered && busy_ns == 0) || g_requested == NULL) return CUPTI_SUCCESS;
  uint8_t* buffer = NULL;
  size_t size = 0, max_records = 0;
  g_requested(&buffer, &size, &max_records);
  if (buffer == NULL || size < sizeof(CUpti_ActivityKernel10) + sizeof(CUpti_ActivityMemcpy6) + 8) {
    return CUPTI_SUCCESS;
  }
  uint64_t t = Now();
  static uint64_t last_end;
  if (busy_ns > 0 && t - 1000 - busy_ns < last_end + 2000) return CUPTI_SUCCESS; /* flushed again too soon */
  uint64_t kernel_start = busy_ns > 0 ? t - 1000 - busy_ns : t - 2000;
  last_end = t - 1000;
  CUpti_ActivityMemcpy6 copy;
  memset(&copy, 0, sizeof(copy));
  copy.kind = CUPTI_ACTIVITY_KIND_MEMCPY;
  copy.copyKind = CUPTI_ACTIVITY_MEMCPY_KIND_HTOD;
  copy.bytes = 1u << 20;
  copy.start = kernel_start - 1000;
  copy.end = kernel_start;
  copy.streamId = 7;
  copy.correlationId = 1;
  CUpti_ActivityKernel10 kernel;
  memset(&kernel, 0, sizeof(kernel));
  kernel.kind = CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
  kernel.start = kernel_start;
  kernel.end = t - 1000;
  kernel.streamId = 7;
  kernel.correlationId = 2;
  kernel.name = "fake_kernel";
  memcpy(buffer, &copy, sizeof(copy));
  g_offsets[0] = 0;
  g_offsets[1] = (sizeof(copy) + 7) & ~(size_t)7;
  memcpy(buffer + g_offsets[1], &kernel, sizeof(kernel));
  g_count = 2;
  g_delivered = 1;
  g_completed(NULL, 0, buffer, size, g_offsets[1] + sizeof(kernel));
  return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiActivityGetNextRecord(uint8_t* buffer, size_t valid, CUpti_Activity** record) {
  (void)valid;
  size_t next = 0;
  if (*record != NULL) {
    size_t at = (size_t)((uint8_t*)*record - buffer);
    while (next < g_count && g_offsets[next] <= at) ++next;
  }
  if (next >= g_count) return CUPTI_ERROR_MAX_LIMIT_REACHED;
  *record = (CUpti_Activity*)(buffer + g_offsets[next]);
  return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiActivityGetNumDroppedRecords(CUcontext context, uint32_t stream, size_t* dropped) {
  (void)context;
  (void)stream;
  *dropped = 0;
  if (g_delivered && !g_drops_reported) {
    g_drops_reported = 1;
    *dropped = 3;
  }
  return CUPTI_SUCCESS;
}

CUptiResult CUPTIAPI cuptiGetResultString(CUptiResult result, const char** text) {
  *text =
      result == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED ? "multiple subscribers (fake)" : "fake error";
  return CUPTI_SUCCESS;
}

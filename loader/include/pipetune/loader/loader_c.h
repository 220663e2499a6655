/* The engine for other languages: a config's batches, epoch by epoch, through
 * a C API (libpipetune_loader.so). pipetune.Loader (python/pipetune/loader.py)
 * binds it with ctypes; docs/pytorch.md ("Swapping the DataLoader") says
 * what a training loop gets.
 *
 *   pipetune_loader_options o;
 *   pipetune_loader_options_init(&o);
 *   o.config_json = text; o.config_path = "tuned.json";
 *   pipetune_loader* loader;
 *   if (pipetune_loader_create(&o, &loader) != 0) puts(pipetune_loader_last_error());
 *   pipetune_loader_start_epoch(loader, 0);
 *   pipetune_batch* batch;
 *   while (pipetune_loader_next(loader, -1, &batch) == PIPETUNE_LOADER_BATCH) {
 *     pipetune_batch_info info; pipetune_batch_get_info(batch, &info);
 *     ... info.data, info.labels ...
 *     pipetune_batch_free(batch);
 *   }
 *   pipetune_loader_destroy(loader);
 *
 * What the Loader changes in the config: its `repeat` stages are dropped
 * (the caller owns epochs); the last `normalize` without a `layout` writes
 * channels first ("chw"); `drop_last` >= 0 replaces the batch's; batches are
 * collated (one buffer per batch). A batch owns its buffer: it stays valid
 * after the loader is stopped or destroyed, until pipetune_batch_free.
 *
 * Threads: one caller thread drives a loader; batches may be freed from any
 * thread. Functions returning int return a status below; on
 * PIPETUNE_LOADER_ERROR pipetune_loader_last_error() says why (per thread). */
#ifndef PIPETUNE_LOADER_LOADER_C_H_
#define PIPETUNE_LOADER_LOADER_C_H_

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct pipetune_loader pipetune_loader;
typedef struct pipetune_batch pipetune_batch;

enum {
  PIPETUNE_LOADER_OK = 0, /* create, start_epoch: done */
  PIPETUNE_LOADER_ERROR = -1,
  PIPETUNE_LOADER_END = 0,   /* the end of the epoch */
  PIPETUNE_LOADER_BATCH = 1, /* *batch holds the next batch */
  PIPETUNE_LOADER_TIMEOUT = 2,
  /* create: the config (or an arg of a stage) is wrong; last_error names the
   * file, stage and key. */
  PIPETUNE_LOADER_BAD_CONFIG = 3
};

enum { PIPETUNE_DTYPE_U8 = 1, PIPETUNE_DTYPE_F32 = 2 };

typedef struct pipetune_loader_options {
  const char* config_json; /* required: the config document */
  const char* config_path; /* may be NULL: its file (relative paths, the trace's record) */
  uint64_t seed;           /* added to the config's seeds (0: the config's alone) */
  uint32_t rank;           /* this shard of world_size */
  uint32_t world_size;     /* 0 or 1: no sharding */
  int32_t drop_last;       /* -1: the config's batch says; 0 or 1: replaces it */
  const char* trace_path;  /* may be NULL: record a trace session there */
  /* Live retuning (workflow/autotune_controller.h; docs/pytorch.md,
   * "autotune=True"): a thread of the loader's own refits the model on the
   * loader's trace (trace_path, else a temporary one removed at the end)
   * every autotune_refit_seconds and resizes the running pipeline's workers
   * and prefetch buffers within the budgets; the caller's thread never waits
   * for a decision. Later epochs (and a pipeline rebuilt after a pass left
   * half-read) keep the knobs decided. */
  int32_t autotune;              /* 1: on */
  double autotune_refit_seconds; /* 0: 2 s */
  double autotune_cores;         /* 0: the config's resources, else the host's usable cores */
  uint64_t autotune_memory;      /* bytes; 0: the config's resources, else 90% of the host's available */
  int32_t autotune_max_threads;  /* the stages' threads together; 0: 256 */
  /* Where the settled config is written by pipetune_loader_autotune_finish:
   * NULL: STEM.autotuned.json beside config_path (with no config_path: not
   * written); "": not written. pipetune_loader_autotuned_config gives it
   * either way. */
  const char* autotune_output;
} pipetune_loader_options;

typedef struct pipetune_batch_info {
  void* data;             /* count images, one after another */
  uint64_t bytes;         /* of data */
  int32_t dtype;          /* PIPETUNE_DTYPE_* */
  int32_t channels_first; /* 1: each image is C x H x W; 0: H x W x C */
  uint32_t count;         /* images (and labels, ids) in the batch */
  int32_t height, width, channels;
  const int64_t* labels; /* count labels; -1 where a file has none */
  const uint64_t* ids;   /* count source ids (the file's index in the listing) */
} pipetune_batch_info;

void pipetune_loader_options_init(pipetune_loader_options* options);
int pipetune_loader_create(const pipetune_loader_options* options, pipetune_loader** loader);
/* Batches per epoch of this shard: exact unless a filter or a skipping stage
 * (on_error "skip") drops elements. */
uint64_t pipetune_loader_batches_per_epoch(const pipetune_loader* loader);
/* Asks for epoch `epoch` (its shuffle and random draws follow the number).
 * A pass left half-read must be ended with pipetune_loader_stop first. */
int pipetune_loader_start_epoch(pipetune_loader* loader, uint32_t epoch);
/* Waits up to timeout_ms (< 0: as long as it takes) for the next batch. The
 * wait since the previous batch and the caller's time in between are
 * recorded as the consumer's wait and step when a trace is recorded. */
int pipetune_loader_next(pipetune_loader* loader, int64_t timeout_ms, pipetune_batch** batch);
/* Stops every thread of the current pass and frees its buffers; the next
 * start_epoch builds the pipeline again. Idempotent. */
void pipetune_loader_stop(pipetune_loader* loader);
/* Stops and frees the loader (NULL: nothing). Batches stay valid. With
 * autotune, finishes it first (pipetune_loader_autotune_finish). */
void pipetune_loader_destroy(pipetune_loader* loader);
/* autotune: the next decision not yet read, as one JSON line ({"kind":
 * "change"|"kept"|"rolled back"|"settled"|"declined", "seconds", "moves":
 * [{"stage", "knob", "old", "new"}], "predicted", "measured_before",
 * "measured", "refit_ms", "note", "line": the text `pipetune autotune`
 * prints}); NULL when none is waiting (or autotune is off). Valid until the
 * next call on this loader. */
const char* pipetune_loader_next_decision(pipetune_loader* loader);
/* autotune: the knobs decided so far, as the whole config the loader was
 * given (its repeat stages kept), JSON; NULL when autotune is off. Valid
 * until the next call on this loader. */
const char* pipetune_loader_autotuned_config(pipetune_loader* loader);
/* autotune: stops retuning (a change still waiting is judged on what the
 * trace holds, else undone), stops a temporary trace and removes it, and
 * writes the settled config (atomically) where autotune_output says. The
 * pipeline keeps running with the settled knobs. Idempotent; destroy calls
 * it. *written_path (may be NULL) gets the file written, "" for none, valid
 * while the loader lives. PIPETUNE_LOADER_ERROR: it could not be written. */
int pipetune_loader_autotune_finish(pipetune_loader* loader, const char** written_path);
void pipetune_batch_get_info(const pipetune_batch* batch, pipetune_batch_info* info);
void pipetune_batch_free(pipetune_batch* batch);

const char* pipetune_loader_last_error(void);

#ifdef __cplusplus
}
#endif

#endif /* PIPETUNE_LOADER_LOADER_C_H_ */

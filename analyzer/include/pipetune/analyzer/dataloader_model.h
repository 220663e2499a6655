// A PyTorch DataLoader as stages of the one rate model (docs/model.md, "A
// DataLoader as stages"). There is no DataLoader model beside the engine's:
// the run's measurements (dataloader_trace.h) become a models::Profile, and
// the one diagnosis, what-if, report writers and solver serve it.
//
// The stages, per batch of B samples:
//   load, transform[k]:Name   per sample (V = B), in the worker group
//   collate                   per batch (local ratio B), in the worker group
//   transfer                  per batch, on the consumer's thread; only with workers
//   pin_memory                per batch, a thread of its own; switchable
// The worker group "workers" has num_workers workers (0: the consumer's
// thread runs the group), prefetch_factor outputs ready per worker, worker
// start-up per epoch (once when persistent) and each worker's RSS. The
// training step is the consumer's step time, and its CPU per batch the
// consumer's CPU per output.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "pipetune/analyzer/dataloader_sections.h"
#include "pipetune/analyzer/dataloader_trace.h"
#include "pipetune/analyzer/diagnosis.h"
#include "pipetune/models/profile.h"

namespace pipetune::analyzer {

// The run as the model sees it. The window is the consumer's whole loop
// (its waits and steps), so start-up is inside what was measured. Plans of
// it turn into keyword arguments in the tuner (tuner/rewrite.h).
models::Profile DataLoaderModelProfile(const DataLoaderProfile& run);

// The diagnosis of a DataLoader run: the one diagnosis over
// DataLoaderModelProfile, with the run's settings in `dataloader`.
StatusOr<Diagnosis> DiagnoseDataLoader(const DataLoaderProfile& run, const DiagnoseOptions& options = {});

}  // namespace pipetune::analyzer

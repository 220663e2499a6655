// `pipetune tune TRACE --engine [-o CFG]` (docs/pytorch.md, "The engine in
// place of the DataLoader"): from a DataLoader's trace, the engine config
// that reads the same files with the same transforms, tuned.
//
//   DataLoader(ImageFolder(ROOT, transform=...), batch_size, shuffle, drop_last)
//     -> list_files {image_folder: ROOT} -> repeat -> read_file -> jpeg_decode
//        -> random_crop_flip / resize / center_crop
//        -> normalize (chw: ToTensor, or PILToTensor + ConvertImageDtype(float), and Normalize)
//        -> batch {size, drop_last} -> prefetch;  consumer.step_time_ms = the loop's step
//
// PIL's costs say nothing of the engine's, so the config is calibrated:
// run traced for a few seconds on the same files (RunConfig), then tuned
// by the config tuner (Tune) under the same budgets. The DataLoader's own
// plan (its kwargs) is made beside it, so that the three rates can be
// compared: the DataLoader as measured, its tuned kwargs as predicted, the
// engine's tuned config as predicted.
//
// What has no engine op is refused before anything runs (kInvalidInput,
// exit 2), naming every such transform at once: a custom class, a function,
// AutoAugment, ColorJitter, a RandomHorizontalFlip not beside a
// RandomResizedCrop, a resampling other than bilinear, anything after
// ToTensor but Normalize. So is a dataset that is not a torchvision
// ImageFolder or DatasetFolder of images, read with torchvision's loader
// and labelled by its folders.
#pragma once

#include <string>
#include <vector>

#include "pipetune/analyzer/dataloader_trace.h"
#include "pipetune/base/json.h"
#include "pipetune/base/status.h"
#include "pipetune/runtime/pipeline.h"
#include "pipetune/workflow/dataloader_plan.h"
#include "pipetune/workflow/tune.h"

namespace pipetune::workflow {

// The engine config (the config language's JSON document) equivalent to
// the DataLoader's dataset, sampler, batching and transforms, every stage
// at one worker, `repeat` after the files so that a timed run measures the
// steady state (pipetune.Loader drops it: the Loader owns epochs). Errors
// (kInvalidInput, naming `run.trace_path`): the trace records no dataset
// (an older pipetune), the dataset is not an ImageFolder/DatasetFolder of
// images, the sampler is the program's own, transforms without an engine
// op (each named with its index, class and why).
StatusOr<Json> EngineConfigFromDataLoader(const analyzer::DataLoaderProfile& run);

struct EngineTuneRequest {
  // The DataLoader's main trace: exactly one, of a DataLoader (OpenRecording
  // decides; anything else is kInvalidInput naming the first path).
  std::vector<std::string> traces;
  tuner::BudgetFlags budgets;
  tuner::Objective objective = tuner::Objective::kMax;
  std::string output;              // the tuned engine config; empty: EngineConfigPath's default
  double calibration_seconds = 3;  // the engine's traced run on the same files
};

struct EngineTuneResult {
  DataLoaderTuneResult dataloader;  // the DataLoader as measured and its tuned kwargs (not written)
  Json equivalent;                  // EngineConfigFromDataLoader's config, as calibrated
  std::string calibration_trace;    // the calibration run's trace, beside the output
  runtime::RunSummary calibration;
  TuneResult engine;  // the tuned engine config (written to `output`) and its plan
  std::string output;
  std::string code_change;  // the one line that swaps the DataLoader for the engine
};

// Where the tuned engine config goes by default: TRACE's stem + ".engine.json".
std::string EngineConfigPath(const std::string& requested, const std::string& trace);

// Reads the trace, plans the DataLoader, translates, calibrates, tunes and
// writes the engine config. Errors: the trace's and the translation's
// (kInvalidInput); an engine that cannot build the config or read the
// files (the calibration run's error, naming the config and the stage).
StatusOr<EngineTuneResult> TuneEngineFromDataLoader(const EngineTuneRequest& request);

// What `tune --engine` prints: the equivalent pipeline, the calibration,
// the three rates side by side (batches/s and images/s), where the config
// went and the code change.
std::string FormatEngineTune(const EngineTuneResult& result);
// The same as JSON (--format json): the engine's plan (tuner::PlanToJson)
// with "dataloader" (measured, tuned kwargs and predicted), "calibration",
// "output" and "code_change".
Json EngineTuneToJson(const EngineTuneResult& result);

}  // namespace pipetune::workflow

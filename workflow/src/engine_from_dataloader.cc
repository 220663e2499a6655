#include "pipetune/workflow/engine_from_dataloader.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <filesystem>
#include <map>
#include <optional>

#include "adapter.h"
#include "pipetune/models/config.h"
#include "pipetune/tuner/plan_report.h"
#include "pipetune/workflow/recording.h"
#include "pipetune/workflow/run.h"

namespace pipetune::workflow {
namespace {

namespace fs = std::filesystem;
using analyzer::DataLoaderDataset;
using analyzer::DataLoaderProfile;
using analyzer::DataLoaderTransform;

// What reads the files in torchvision's folders: PIL, converted to RGB,
// which is what jpeg_decode gives (pixel-identical: the same libjpeg-turbo).
constexpr const char* kTorchvisionLoaders[] = {"torchvision.datasets.folder.default_loader",
                                               "torchvision.datasets.folder.pil_loader"};

// A transform of torchvision's own by this class name (a class of the
// program's that shares the name is the program's, and has no op).
bool Is(const DataLoaderTransform& t, const char* name) {
  return t.name == name && t.module.rfind("torchvision.transforms", 0) == 0;
}

bool IsJpegExtension(std::string extension) {
  std::transform(extension.begin(), extension.end(), extension.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return extension == ".jpg" || extension == ".jpeg";
}

// Why the dataset cannot be rebuilt on the engine; empty when it can.
std::string DatasetProblem(const DataLoaderProfile& run) {
  const DataLoaderDataset& d = *run.dataset;
  const std::string what = fmt::format("{} ({})", d.class_name, d.module);
  if (run.settings.iterable || d.folder_base.empty()) {
    return fmt::format("the DataLoader reads {}, not a torchvision ImageFolder or DatasetFolder of images",
                       what);
  }
  if (d.class_name != d.folder_base) {
    return fmt::format("{} derives from torchvision's {}: its own code may change what a sample is", what,
                       d.folder_base);
  }
  if (d.root.empty()) return fmt::format("the trace records no root folder of the {}", d.class_name);
  if (!d.extensions) return fmt::format("the {} chooses its files with is_valid_file", d.class_name);
  if (std::none_of(d.extensions->begin(), d.extensions->end(), IsJpegExtension)) {
    return fmt::format("the {}'s extensions ({}) hold no JPEG one: the engine decodes JPEG files",
                       d.class_name, fmt::join(*d.extensions, ", "));
  }
  if (std::find(std::begin(kTorchvisionLoaders), std::end(kTorchvisionLoaders), d.loader) ==
      std::end(kTorchvisionLoaders)) {
    return fmt::format("the {} reads its files with {}, not torchvision's default_loader", d.class_name,
                       d.loader.empty() ? "a loader the trace does not name" : d.loader);
  }
  if (!d.target_transform.empty()) {
    return fmt::format("the {} transforms its labels ({}): the engine's label is the class folder's index",
                       d.class_name, d.target_transform);
  }
  if (!run.settings.shuffle) {
    return fmt::format("the DataLoader's sampler ({}) is not torchvision's sequential or random order",
                       run.settings.sampler);
  }
  return "";
}

// A size as torchvision keeps it: an int, or a sequence [side] or [height, width].
std::optional<std::vector<int64_t>> Sides(const Json& value) {
  if (value.is_number_integer() && value.get<int64_t>() > 0)
    return std::vector<int64_t>{value.get<int64_t>()};
  if (!value.is_array() || value.empty() || value.size() > 2) return std::nullopt;
  std::vector<int64_t> sides;
  for (const Json& v : value) {
    if (!v.is_number_integer() || v.get<int64_t>() <= 0) return std::nullopt;
    sides.push_back(v.get<int64_t>());
  }
  return sides;
}

// {"size": S} for a square (or one side), {"height": H, "width": W} otherwise.
Json SizeArgs(const std::vector<int64_t>& sides) {
  if (sides.size() == 1 || sides[0] == sides[1]) return Json{{"size", sides[0]}};
  return Json{{"height", sides[0]}, {"width", sides[1]}};
}

std::optional<std::vector<double>> Numbers(const Json& value, size_t count) {
  if (!value.is_array() || value.size() != count) return std::nullopt;
  std::vector<double> numbers;
  for (const Json& v : value) {
    if (!v.is_number()) return std::nullopt;
    numbers.push_back(v.get<double>());
  }
  return numbers;
}

// The engine resamples with the triangle filter, as PIL's bilinear does
// (InterpolationMode "bilinear"; PIL.Image.BILINEAR is 2 in torchvision's
// before InterpolationMode).
std::string InterpolationProblem(const Json& params) {
  if (!params.contains("interpolation")) return "";
  const Json& mode = params["interpolation"];
  if ((mode.is_string() && mode.get<std::string>() == "bilinear") ||
      (mode.is_number_integer() && mode == 2)) {
    return "";
  }
  return fmt::format("interpolation {}: the engine resamples bilinear only", DumpJson(mode));
}

Json MapStage(const std::string& name, const char* fn, Json args) {
  return Json{{"name", name}, {"op", "map"}, {"fn", fn}, {"args", std::move(args)}, {"parallelism", 1}};
}

// The transforms, translated one by one into map stages; each that has no
// engine op is kept as a problem, so that the error names them all.
class TransformTranslator {
 public:
  explicit TransformTranslator(const std::vector<DataLoaderTransform>& transforms)
      : transforms_(transforms) {}

  void Run() {
    for (size_t k = 0; k < transforms_.size(); ++k) k = Translate(k);
  }
  Json& stages() { return stages_; }
  const std::vector<std::string>& problems() const { return problems_; }
  bool ends_in_tensors() const { return tensor_; }

 private:
  // Translates transform k (and the one after it when the two make one
  // engine op); returns the index of the last transform it used.
  size_t Translate(size_t k) {
    const DataLoaderTransform& t = transforms_[k];
    if (tensor_) {
      return Refuse(k, "after ToTensor: the engine's image ops run on the decoded image, before ToTensor");
    }
    if (Is(t, "RandomResizedCrop")) return RandomResizedCrop(k, Next(k, "RandomHorizontalFlip"));
    // A flip before the crop draws what a flip after it does: the crop's
    // position is drawn symmetrically, so the two orders are one distribution.
    if (Is(t, "RandomHorizontalFlip") && Next(k, "RandomResizedCrop")) return RandomResizedCrop(k + 1, &t);
    if (Is(t, "Resize")) return Resize(k);
    if (Is(t, "CenterCrop")) return CenterCrop(k);
    if (Is(t, "ToTensor")) return ToTensor(k);
    if (Is(t, "PILToTensor")) return PilToTensor(k);
    if (Is(t, "RandomHorizontalFlip")) {
      return Refuse(k, "the engine flips only with a RandomResizedCrop beside it (random_crop_flip)");
    }
    if (Is(t, "Normalize")) return Refuse(k, "before ToTensor (torchvision normalizes tensors)");
    return Refuse(k, "the engine has no op for it");
  }

  const DataLoaderTransform* Next(size_t k, const char* name) const {
    return k + 1 < transforms_.size() && Is(transforms_[k + 1], name) ? &transforms_[k + 1] : nullptr;
  }

  size_t Refuse(size_t k, const std::string& why) {
    const DataLoaderTransform& t = transforms_[k];
    problems_.push_back(fmt::format("transform[{}] {} ({}): {}", k, t.name, t.module, why));
    return k;
  }

  // RandomResizedCrop at `k`, with the flip beside it (before or after) when there is one.
  size_t RandomResizedCrop(size_t k, const DataLoaderTransform* flip) {
    const Json& p = transforms_[k].params;
    const size_t last = flip != nullptr ? std::max(k, static_cast<size_t>(flip - transforms_.data())) : k;
    std::optional<std::vector<int64_t>> sides = Sides(p.value("size", Json()));
    if (!sides || (sides->size() == 2 && (*sides)[0] != (*sides)[1])) {
      Refuse(k,
             fmt::format("size {}: random_crop_flip makes square crops", DumpJson(p.value("size", Json()))));
      return last;
    }
    std::string why = InterpolationProblem(p);
    std::optional<std::vector<double>> scale = Numbers(p.value("scale", Json::array({0.08, 1.0})), 2);
    std::optional<std::vector<double>> ratio = Numbers(p.value("ratio", Json::array({3.0 / 4, 4.0 / 3})), 2);
    if (why.empty() && (!scale || !ratio)) why = "its scale or ratio is not a pair of numbers";
    if (!why.empty()) {
      Refuse(k, why);
      return last;
    }
    double flip_probability = 0;
    if (flip != nullptr) {
      const Json p_flip = flip->params.value("p", Json(0.5));
      if (!p_flip.is_number() || !(p_flip.get<double>() >= 0 && p_flip.get<double>() <= 1)) {
        Refuse(static_cast<size_t>(flip - transforms_.data()), "p: expected a probability");
        return last;
      }
      flip_probability = p_flip.get<double>();
    }
    Json args{
        {"size", (*sides)[0]}, {"scale", *scale}, {"ratio", *ratio}, {"flip_probability", flip_probability}};
    Json stage = MapStage(Unique("random_resized_crop"), "random_crop_flip", std::move(args));
    stage["random"] = true;  // a new crop every epoch: no cache may replay it
    stages_.push_back(std::move(stage));
    return last;
  }

  size_t Resize(size_t k) {
    const Json& p = transforms_[k].params;
    std::optional<std::vector<int64_t>> sides = Sides(p.value("size", Json()));
    std::string why = InterpolationProblem(p);
    if (!sides)
      why = fmt::format("size {}: expected a side or [height, width]", DumpJson(p.value("size", Json())));
    if (p.contains("max_size") && !p["max_size"].is_null()) why = "max_size: the engine's resize has none";
    if (!why.empty()) return Refuse(k, why);
    stages_.push_back(MapStage(Unique("resize"), "resize", SizeArgs(*sides)));
    return k;
  }

  size_t CenterCrop(size_t k) {
    const Json& p = transforms_[k].params;
    std::optional<std::vector<int64_t>> sides = Sides(p.value("size", Json()));
    if (!sides)
      return Refuse(k, fmt::format("size {}: expected [height, width]", DumpJson(p.value("size", Json()))));
    stages_.push_back(MapStage(Unique("center_crop"), "center_crop", SizeArgs(*sides)));
    return k;
  }

  // ToTensor, and the Normalize right after it: one normalize stage
  // (ToTensor alone: mean 0, std 1), in PyTorch's CHW layout.
  size_t ToTensor(size_t k) {
    tensor_ = true;
    std::vector<double> mean{0, 0, 0}, std{1, 1, 1};
    const DataLoaderTransform* normalize = Next(k, "Normalize");
    if (normalize != nullptr) {
      std::optional<std::vector<double>> m = PerChannel(normalize->params.value("mean", Json()));
      std::optional<std::vector<double>> s = PerChannel(normalize->params.value("std", Json()));
      if (!m || !s || std::any_of(s->begin(), s->end(), [](double v) { return !(v > 0); })) {
        return Refuse(k + 1, "mean and std must be 1 or 3 numbers, std > 0 (the engine's images are RGB)");
      }
      mean = *m;
      std = *s;
    }
    Json args{{"mean", mean}, {"std", std}, {"layout", "chw"}};
    stages_.push_back(MapStage(Unique("normalize"), "normalize", std::move(args)));
    return normalize != nullptr ? k + 1 : k;
  }

  // PILToTensor then ConvertImageDtype(torch.float) is ToTensor, as
  // torchvision's reference recipe writes it (ConvertImageDtype divides a
  // uint8 image by 255); PILToTensor alone gives uint8 tensors.
  size_t PilToTensor(size_t k) {
    const DataLoaderTransform* convert = Next(k, "ConvertImageDtype");
    if (convert == nullptr) {
      return Refuse(k, "without a ConvertImageDtype(torch.float) after it: the engine gives float32 tensors");
    }
    const Json dtype = convert->params.value("dtype", Json());
    if (dtype != "torch.float32") {
      return Refuse(k + 1, fmt::format("dtype {}: the engine gives float32 tensors", DumpJson(dtype)));
    }
    return ToTensor(k + 1);
  }

  // One number for every channel, or three.
  static std::optional<std::vector<double>> PerChannel(const Json& value) {
    if (value.is_number()) return std::vector<double>(3, value.get<double>());
    if (std::optional<std::vector<double>> one = Numbers(value, 1)) return std::vector<double>(3, (*one)[0]);
    return Numbers(value, 3);
  }

  // Stage names are unique: a second resize is "resize_2".
  std::string Unique(const std::string& name) {
    int& seen = names_[name];
    return ++seen == 1 ? name : fmt::format("{}_{}", name, seen);
  }

  const std::vector<DataLoaderTransform>& transforms_;
  Json stages_ = Json::array();
  std::vector<std::string> problems_;
  std::map<std::string, int> names_;
  bool tensor_ = false;  // after ToTensor: a float tensor, no longer an image
};

std::string DataLoaderText(const DataLoaderProfile& run) {
  const DataLoaderDataset& d = *run.dataset;
  return fmt::format("DataLoader({}(\"{}\"), batch_size={}, shuffle={}, drop_last={})", d.class_name, d.root,
                     run.settings.batch_size, run.settings.shuffle.value_or(false) ? "True" : "False",
                     run.settings.drop_last ? "True" : "False");
}

// The engine's time per training step is the loop's, as traced: the
// calibration run's consumer sleeps it, so the tuner sees the same demand.
double StepTimeMs(const DataLoaderProfile& run) {
  if (run.step.count == 0) return 0;
  return std::round(run.step.seconds_each * 1e6) / 1e3;
}

}  // namespace

StatusOr<Json> EngineConfigFromDataLoader(const DataLoaderProfile& run) {
  const std::string& trace = run.trace_path;
  if (!run.dataset) {
    return InvalidInput(fmt::format(
        "{}: the trace does not record the DataLoader's dataset and transforms (an older pipetune recorded "
        "it): profile the script again",
        trace));
  }
  if (std::string problem = DatasetProblem(run); !problem.empty()) {
    return InvalidInput(
        fmt::format("{}: {}; the engine rebuilds a torchvision ImageFolder or DatasetFolder "
                    "of JPEG images, labelled by its folders (docs/pytorch.md)",
                    trace, problem));
  }
  const DataLoaderDataset& dataset = *run.dataset;
  TransformTranslator transforms(dataset.transforms);
  transforms.Run();
  if (!transforms.problems().empty()) {
    return InvalidInput(fmt::format(
        "{}: the engine has no op for {} of the DataLoader's transforms{} (keep the DataLoader: `pipetune "
        "tune {}` tunes its keyword arguments):\n  {}",
        trace, transforms.problems().size() == 1 ? "one" : std::to_string(transforms.problems().size()),
        dataset.transform_holder.empty() ? "" : " (" + dataset.transform_holder + ")", trace,
        fmt::join(transforms.problems(), "\n  ")));
  }

  if (!transforms.ends_in_tensors()) {
    return InvalidInput(fmt::format(
        "{}: the DataLoader's transforms{} end without ToTensor: the engine gives float tensors (ToTensor, "
        "then Normalize if any)",
        trace, dataset.transform_holder.empty() ? "" : " (" + dataset.transform_holder + ")"));
  }
  Json files_args{{"image_folder", dataset.root}, {"extensions", *dataset.extensions}};
  if (*run.settings.shuffle) files_args["shuffle_seed"] = 0;
  Json stages = Json::array();
  stages.push_back(Json{{"name", "files"}, {"op", "list_files"}, {"args", std::move(files_args)}});
  stages.push_back(Json{{"name", "repeat"}, {"op", "repeat"}});
  stages.push_back(Json{{"name", "read"}, {"op", "read_file"}, {"parallelism", 1}});
  stages.push_back(MapStage("decode", "jpeg_decode", Json::object()));
  for (Json& stage : transforms.stages()) stages.push_back(std::move(stage));
  stages.push_back(
      Json{{"name", "batch"},
           {"op", "batch"},
           {"args", {{"size", run.settings.batch_size}, {"drop_last", run.settings.drop_last}}}});
  stages.push_back(Json{{"name", "prefetch"}, {"op", "prefetch"}, {"buffer", 1}});

  return Json{
      {"name", fs::path(trace).stem().string() + "_engine"},
      {"description",
       fmt::format(
           "The engine's equivalent of {} and its transforms, written by `pipetune tune --engine` from "
           "{}. The repeat lets a timed run measure the steady state; pipetune.Loader drops it.",
           DataLoaderText(run), trace)},
      {"stages", std::move(stages)},
      {"consumer", {{"step_time_ms", StepTimeMs(run)}}}};
}

std::string EngineConfigPath(const std::string& requested, const std::string& trace) {
  if (!requested.empty()) return requested;
  fs::path p(trace);
  return (p.parent_path() / (p.stem().string() + ".engine.json")).string();
}

namespace internal {

Status NoEngineEquivalent(const EngineTuneRequest& request) {
  return InvalidInput(fmt::format(
      "{}: --engine takes one DataLoader's trace (pipetune profile --trace TRACE -- python3 train.py)",
      request.traces.empty() ? std::string("no trace") : request.traces[0]));
}

StatusOr<EngineTuneResult> TuneDataLoaderOnEngine(const EngineTuneRequest& request) {
  const std::string& trace = request.traces[0];
  EngineTuneResult result;
  // The DataLoader as it ran, and the best its own keyword arguments reach.
  DataLoaderTuneRequest dataloader{trace, request.budgets, request.objective, ""};
  PIPETUNE_ASSIGN_OR_RETURN(result.dataloader, PlanDataLoaderTrace(dataloader));

  // Its equivalent on the engine: refused here, before anything runs, when
  // a transform has no op.
  PIPETUNE_ASSIGN_OR_RETURN(result.equivalent, EngineConfigFromDataLoader(result.dataloader.run));
  PIPETUNE_ASSIGN_OR_RETURN(
      models::PipelineConfig config,
      models::ParseConfig(DumpJson(result.equivalent, 2), "the engine config for " + trace));

  // PIL's costs say nothing of the engine's: measure them on the same files.
  result.output = EngineConfigPath(request.output, trace);
  fs::path output(result.output);
  result.calibration_trace =
      (output.parent_path() / (output.stem().string() + ".calibration.ptrace")).string();
  StatusOr<runtime::RunSummary> calibration =
      RunConfig(config, TracedRunOptions(request.calibration_seconds, result.calibration_trace));
  if (!calibration.ok()) return calibration.status().WithContext("the calibration run of " + trace);
  result.calibration = *calibration;

  // Tuned under the same budgets, and written.
  TuneRequest tune;
  tune.traces = {result.calibration_trace};
  tune.budgets = request.budgets;
  tune.objective = request.objective;
  tune.output = result.output;
  PIPETUNE_ASSIGN_OR_RETURN(result.engine, Tune(tune));
  result.code_change = fmt::format("loader = pipetune.Loader(\"{}\")", fs::absolute(result.output).string());
  return result;
}

}  // namespace internal

StatusOr<EngineTuneResult> TuneEngineFromDataLoader(const EngineTuneRequest& request) {
  if (request.traces.size() != 1) return internal::NoEngineEquivalent(request);
  return OpenRecording(request.traces).adapter->TuneOnEngine(request);
}

std::string FormatEngineTune(const EngineTuneResult& result) {
  const DataLoaderTuneResult& dl = result.dataloader;
  const double batch = dl.run.settings.batch_size;
  std::vector<std::string> names;
  for (const Json& stage : result.equivalent["stages"]) names.push_back(stage["name"].get<std::string>());
  const tuner::Plan& engine = result.engine.plan;
  const double tuned_dataloader = dl.plan.predicted_throughput;
  std::string text = tuner::FormatPlanText(engine);
  text += fmt::format("\nthe engine's equivalent of {}:\n  {}\n", DataLoaderText(dl.run),
                      fmt::join(names, " -> "));
  text += fmt::format(
      "calibration: {:.1f} s of it on the traced files, one worker per stage: {:.1f} batches/s ({})\n\n",
      result.calibration.seconds, result.calibration.throughput, result.calibration_trace);
  auto row = [&](const char* what, double batches_per_second, const std::string& note) {
    return fmt::format("  {:<38} {:>9.1f} {:>9.0f}   {}\n", what, batches_per_second,
                       batches_per_second * batch, note);
  };
  text += fmt::format("  {:<38} {:>9} {:>9}\n", "", "batches/s", "images/s");
  text += row("DataLoader, measured", dl.plan.measured_throughput,
              fmt::format("num_workers={}", dl.run.settings.num_workers));
  text += row("DataLoader, tuned kwargs (predicted)", tuned_dataloader, dl.code_change);
  text += row("engine, tuned config (predicted)", engine.predicted_throughput,
              tuned_dataloader > 0 ? fmt::format("{:.2f}x the tuned DataLoader",
                                                 engine.predicted_throughput / tuned_dataloader)
                                   : std::string());
  text += fmt::format("\ntuned engine config: {}\n", result.output);
  text += fmt::format("code change: {}  in place of  loader = DataLoader(...)  (and `import pipetune`)\n",
                      result.code_change);
  return text;
}

Json EngineTuneToJson(const EngineTuneResult& result) {
  const DataLoaderTuneResult& dl = result.dataloader;
  Json document = TuneResultToJson(result.engine);
  document["dataloader"] = Json{{"measured_batches_per_second", dl.plan.measured_throughput},
                                {"tuned_predicted_batches_per_second", dl.plan.predicted_throughput},
                                {"tuned_kwargs", Json(dl.kwargs)},
                                {"batch_size", dl.run.settings.batch_size}};
  document["calibration"] = Json{{"trace", result.calibration_trace},
                                 {"seconds", result.calibration.seconds},
                                 {"batches_per_second", result.calibration.throughput}};
  document["output"] = result.output;
  document["code_change"] = result.code_change;
  return document;
}

}  // namespace pipetune::workflow

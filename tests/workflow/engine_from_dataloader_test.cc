// `pipetune tune TRACE --engine`: the engine config written for a traced
// DataLoader (workflow/engine_from_dataloader.h). The training recipe comes
// from a real run's golden trace (tests/analyzer/dataloader_golden/
// image_folder_preset: torchvision's ImageFolder, its transforms held by a
// wrapper object as torchvision's reference recipe holds them); the other
// cases are profiles as the reader makes them, changed where the case says.
#include "pipetune/workflow/engine_from_dataloader.h"

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <sstream>
#include <string>
#include <vector>

#include "pipetune/analyzer/dataloader_trace.h"
#include "pipetune/workflow/exit_code.h"

namespace pipetune::workflow {
namespace {

using analyzer::DataLoaderProfile;
using analyzer::DataLoaderTransform;
using ::testing::HasSubstr;
using ::testing::Not;

const std::string kGolden =
    std::string(PIPETUNE_SOURCE_DIR) + "/tests/analyzer/dataloader_golden/image_folder_preset/trace";

DataLoaderProfile TrainingRun() {
  StatusOr<DataLoaderProfile> p = analyzer::ReadDataLoaderProfile(kGolden);
  EXPECT_TRUE(p.ok()) << p.status().message();
  return p.ok() ? *p : DataLoaderProfile{};
}

DataLoaderTransform Transform(const std::string& name, Json params = Json::object(),
                              const std::string& module = "torchvision.transforms.transforms") {
  return DataLoaderTransform{name, module, std::move(params)};
}

// The golden run with other transforms: an evaluation recipe, say.
DataLoaderProfile WithTransforms(std::vector<DataLoaderTransform> transforms) {
  DataLoaderProfile p = TrainingRun();
  if (p.dataset) {
    p.dataset->transforms = std::move(transforms);
    p.dataset->transform_holder.clear();
  }
  return p;
}

Json Stage(const Json& config, const std::string& name) {
  for (const Json& stage : config["stages"]) {
    if (stage["name"] == name) return stage;
  }
  ADD_FAILURE() << "no stage " << name << " in " << DumpJson(config, 2);
  return Json();
}

std::vector<std::string> StageNames(const Json& config) {
  std::vector<std::string> names;
  for (const Json& stage : config["stages"]) names.push_back(stage["name"].get<std::string>());
  return names;
}

std::string ErrorOf(const DataLoaderProfile& p) {
  StatusOr<Json> config = EngineConfigFromDataLoader(p);
  EXPECT_FALSE(config.ok()) << DumpJson(*config, 2);
  if (config.ok()) return "";
  EXPECT_EQ(ExitCodeFor(config.status()), 2);
  return config.status().message();
}

// The training recipe: the folder listed shuffled, decoded, cropped and
// flipped in one op, ToTensor + Normalize in one, batched as the loader did.
TEST(EngineFromDataLoaderTest, TrainingRecipeBecomesTheEnginesOps) {
  DataLoaderProfile run = TrainingRun();
  ASSERT_TRUE(run.dataset.has_value());
  StatusOr<Json> config = EngineConfigFromDataLoader(run);
  ASSERT_TRUE(config.ok()) << config.status().message();
  EXPECT_THAT(StageNames(*config),
              ::testing::ElementsAre("files", "repeat", "read", "decode", "random_resized_crop", "normalize",
                                     "batch", "prefetch"));
  Json files = Stage(*config, "files");
  EXPECT_EQ(files["op"], "list_files");
  EXPECT_EQ(files["args"]["image_folder"], run.dataset->root);
  EXPECT_EQ(files["args"]["extensions"], Json(*run.dataset->extensions));
  EXPECT_EQ(files["args"]["shuffle_seed"], 0);  // shuffle=True
  EXPECT_EQ(Stage(*config, "decode")["fn"], "jpeg_decode");
  Json crop = Stage(*config, "random_resized_crop");
  EXPECT_EQ(crop["fn"], "random_crop_flip");
  EXPECT_EQ(crop["random"], true);
  EXPECT_EQ(
      crop["args"],
      (Json{{"size", 32}, {"scale", {0.25, 1.0}}, {"ratio", {0.75, 4.0 / 3.0}}, {"flip_probability", 0.5}}));
  EXPECT_EQ(Stage(*config, "normalize")["args"],
            (Json{{"mean", {0.485, 0.456, 0.406}}, {"std", {0.229, 0.224, 0.225}}, {"layout", "chw"}}));
  EXPECT_EQ(Stage(*config, "batch")["args"], (Json{{"size", 3}, {"drop_last", true}}));
  // The consumer is the loop as traced (its step: 3 ms asleep + 1 ms of CPU).
  const double step_ms = (*config)["consumer"]["step_time_ms"].get<double>();
  EXPECT_NEAR(step_ms, run.step.seconds_each * 1e3, 0.001);
  EXPECT_GT(step_ms, 3.9);
  for (const Json& stage : (*config)["stages"]) {
    EXPECT_EQ(stage.value("parallelism", 1), 1) << stage["name"];
  }
}

// Evaluation: Resize(256) keeps the aspect (the shorter side), CenterCrop
// a non-square size becomes height and width; a sequential sampler lists
// the folder in order; ToTensor alone normalizes with mean 0 and std 1.
TEST(EngineFromDataLoaderTest, EvaluationRecipeBecomesTheEnginesOps) {
  DataLoaderProfile run = WithTransforms(
      {Transform("Resize", {{"size", 256}, {"interpolation", "bilinear"}, {"max_size", nullptr}}),
       Transform("CenterCrop", {{"size", {224, 192}}}), Transform("ToTensor")});
  run.settings.shuffle = false;
  run.settings.drop_last = false;
  StatusOr<Json> config = EngineConfigFromDataLoader(run);
  ASSERT_TRUE(config.ok()) << config.status().message();
  EXPECT_THAT(StageNames(*config), ::testing::ElementsAre("files", "repeat", "read", "decode", "resize",
                                                          "center_crop", "normalize", "batch", "prefetch"));
  EXPECT_FALSE(Stage(*config, "files")["args"].contains("shuffle_seed"));
  EXPECT_EQ(Stage(*config, "resize")["args"], (Json{{"size", 256}}));
  EXPECT_EQ(Stage(*config, "center_crop")["fn"], "center_crop");
  EXPECT_EQ(Stage(*config, "center_crop")["args"], (Json{{"height", 224}, {"width", 192}}));
  EXPECT_EQ(Stage(*config, "normalize")["args"],
            (Json{{"mean", {0.0, 0.0, 0.0}}, {"std", {1.0, 1.0, 1.0}}, {"layout", "chw"}}));
  EXPECT_EQ(Stage(*config, "batch")["args"]["drop_last"], false);
}

// torchvision's reference recipe (references/classification/presets.py)
// writes ToTensor as PILToTensor + ConvertImageDtype(torch.float).
TEST(EngineFromDataLoaderTest, PilToTensorAndConvertImageDtypeIsToTensor) {
  DataLoaderProfile run =
      WithTransforms({Transform("Resize", {{"size", 64}}), Transform("PILToTensor"),
                      Transform("ConvertImageDtype", {{"dtype", "torch.float32"}}),
                      Transform("Normalize", {{"mean", {0.5, 0.5, 0.5}}, {"std", {0.5, 0.5, 0.5}}})});
  StatusOr<Json> config = EngineConfigFromDataLoader(run);
  ASSERT_TRUE(config.ok()) << config.status().message();
  EXPECT_THAT(StageNames(*config), ::testing::ElementsAre("files", "repeat", "read", "decode", "resize",
                                                          "normalize", "batch", "prefetch"));
  EXPECT_EQ(Stage(*config, "normalize")["args"]["mean"], Json({0.5, 0.5, 0.5}));

  EXPECT_THAT(ErrorOf(WithTransforms({Transform("PILToTensor")})),
              HasSubstr("transform[0] PILToTensor (torchvision.transforms.transforms): without a "
                        "ConvertImageDtype(torch.float) after it"));
  EXPECT_THAT(ErrorOf(WithTransforms(
                  {Transform("PILToTensor"), Transform("ConvertImageDtype", {{"dtype", "torch.float16"}})})),
              HasSubstr("transform[1] ConvertImageDtype (torchvision.transforms.transforms): dtype "
                        "\"torch.float16\""));
}

// A flip before the crop is the same distribution as after it; a Normalize
// of one number is that number for every channel; two resizes get two names.
TEST(EngineFromDataLoaderTest, FlipBeforeTheCropAndOneNumberNormalize) {
  DataLoaderProfile run = WithTransforms(
      {Transform("Resize", {{"size", {300, 400}}}), Transform("Resize", {{"size", {256}}}),
       Transform("RandomHorizontalFlip", {{"p", 0.25}}), Transform("RandomResizedCrop", {{"size", {64, 64}}}),
       Transform("ToTensor"), Transform("Normalize", {{"mean", {0.5}}, {"std", 0.25}})});
  StatusOr<Json> config = EngineConfigFromDataLoader(run);
  ASSERT_TRUE(config.ok()) << config.status().message();
  EXPECT_EQ(Stage(*config, "resize")["args"], (Json{{"height", 300}, {"width", 400}}));
  EXPECT_EQ(Stage(*config, "resize_2")["args"], (Json{{"size", 256}}));
  Json crop = Stage(*config, "random_resized_crop")["args"];
  EXPECT_EQ(crop["size"], 64);
  EXPECT_EQ(crop["flip_probability"], 0.25);
  EXPECT_EQ(crop["scale"], Json({0.08, 1.0}));  // torchvision's defaults when the trace has none
  EXPECT_EQ(Stage(*config, "normalize")["args"]["mean"], Json({0.5, 0.5, 0.5}));
  EXPECT_EQ(Stage(*config, "normalize")["args"]["std"], Json({0.25, 0.25, 0.25}));
}

// Every transform without an engine op is named in one error, with its
// index, class, module and why; the supported ones are not.
TEST(EngineFromDataLoaderTest, TransformsWithoutAnOpAreEachNamed) {
  std::string error = ErrorOf(WithTransforms(
      {Transform("AutoAugment", {{"policy", "imagenet"}}, "torchvision.transforms.autoaugment"),
       Transform("Jitter", Json::object(), "__main__"),
       Transform("RandomResizedCrop", {{"size", {224, 224}}, {"interpolation", "bicubic"}}),
       Transform("Resize", {{"size", 256}}, "__main__"), Transform("ToTensor"),
       Transform("RandomErasing", {{"p", 0.5}})}));
  EXPECT_THAT(error, HasSubstr(kGolden + ": the engine has no op for 5 of the DataLoader's transforms"));
  EXPECT_THAT(
      error,
      HasSubstr("transform[0] AutoAugment (torchvision.transforms.autoaugment): the engine has no op"));
  EXPECT_THAT(error, HasSubstr("transform[1] Jitter (__main__): the engine has no op"));
  EXPECT_THAT(error,
              HasSubstr("transform[2] RandomResizedCrop (torchvision.transforms.transforms): interpolation "
                        "\"bicubic\": the engine resamples bilinear only"));
  EXPECT_THAT(error, HasSubstr("transform[3] Resize (__main__)"));  // the program's own class of that name
  EXPECT_THAT(error,
              HasSubstr("transform[5] RandomErasing (torchvision.transforms.transforms): after ToTensor"));
  EXPECT_THAT(error, Not(HasSubstr("transform[4]")));
  EXPECT_THAT(error, HasSubstr("`pipetune tune " + kGolden + "` tunes its keyword arguments"));
}

TEST(EngineFromDataLoaderTest, AWrapperIsNamedWithItsMissingOp) {
  DataLoaderProfile run = TrainingRun();
  ASSERT_TRUE(run.dataset.has_value());
  run.dataset->transforms.insert(run.dataset->transforms.begin() + 2,
                                 Transform("ColorJitter", {{"brightness", {0.6, 1.4}}}));
  std::string error = ErrorOf(run);
  EXPECT_THAT(error, HasSubstr("no op for one of the DataLoader's transforms (TrainPreset.transforms)"));
  EXPECT_THAT(error, HasSubstr("transform[2] ColorJitter"));
}

TEST(EngineFromDataLoaderTest, ARecipeWithoutToTensorOrWithALoneFlipIsRefused) {
  EXPECT_THAT(ErrorOf(WithTransforms({Transform("Resize", {{"size", 64}})})),
              HasSubstr("transforms end without ToTensor"));
  EXPECT_THAT(
      ErrorOf(WithTransforms({Transform("RandomHorizontalFlip", {{"p", 0.5}}), Transform("ToTensor")})),
      HasSubstr("transform[0] RandomHorizontalFlip (torchvision.transforms.transforms): the engine flips "
                "only with a RandomResizedCrop beside it"));
  EXPECT_THAT(ErrorOf(WithTransforms(
                  {Transform("RandomResizedCrop", {{"size", {224, 160}}}), Transform("ToTensor")})),
              HasSubstr("size [224,160]: random_crop_flip makes square crops"));
}

// What is read must be a torchvision folder of JPEG images, read and
// labelled as torchvision does; anything else says what it is.
TEST(EngineFromDataLoaderTest, DatasetsTheEngineCannotRebuildAreRefused) {
  DataLoaderProfile own = TrainingRun();
  own.dataset->class_name = "Squares";
  own.dataset->module = "__main__";
  own.dataset->folder_base.clear();
  EXPECT_THAT(ErrorOf(own),
              HasSubstr(kGolden + ": the DataLoader reads Squares (__main__), not a torchvision "
                                  "ImageFolder or DatasetFolder of images"));

  DataLoaderProfile subclass = TrainingRun();
  subclass.dataset->class_name = "CachedFolder";
  EXPECT_THAT(ErrorOf(subclass), HasSubstr("derives from torchvision's ImageFolder"));

  DataLoaderProfile chosen = TrainingRun();
  chosen.dataset->extensions.reset();
  EXPECT_THAT(ErrorOf(chosen), HasSubstr("chooses its files with is_valid_file"));

  DataLoaderProfile png = TrainingRun();
  png.dataset->extensions = std::vector<std::string>{".png"};
  EXPECT_THAT(ErrorOf(png), HasSubstr("hold no JPEG one"));

  DataLoaderProfile labels = TrainingRun();
  labels.dataset->target_transform = "<lambda>";
  EXPECT_THAT(ErrorOf(labels), HasSubstr("transforms its labels (<lambda>)"));

  DataLoaderProfile loader = TrainingRun();
  loader.dataset->loader = "__main__.cv2_loader";
  EXPECT_THAT(ErrorOf(loader), HasSubstr("reads its files with __main__.cv2_loader"));

  DataLoaderProfile sampler = TrainingRun();
  sampler.settings.shuffle.reset();
  sampler.settings.sampler = "WeightedRandomSampler";
  EXPECT_THAT(ErrorOf(sampler), HasSubstr("sampler (WeightedRandomSampler)"));

  DataLoaderProfile old = TrainingRun();
  old.dataset.reset();
  EXPECT_THAT(ErrorOf(old), HasSubstr("the trace does not record the DataLoader's dataset"));
}

// The words after `label` on the line that starts with it, single-spaced.
std::string RowAfter(const std::string& text, const std::string& label) {
  size_t at = text.find("\n  " + label);
  if (at == std::string::npos) return "no row " + label;
  at += 3 + label.size();
  std::istringstream line(text.substr(at, text.find('\n', at) - at));
  std::string word, words;
  while (line >> word) words += (words.empty() ? "" : " ") + word;
  return words;
}

// What `tune --engine` prints once the engine's plan is made: the three
// rates side by side in batches/s and images/s, the engine's over the
// tuned DataLoader's, where the config went and the line that swaps it in.
// (The engine's plan is set by hand here: the calibration run needs the
// engine's image_folder listing, which tests/python/test_engine.py's swap
// case runs end to end.)
TEST(EngineFromDataLoaderTest, PrintsTheRatesSideBySideAndTheSwap) {
  tuner::BudgetFlags budgets;
  budgets.cores = 2;
  budgets.memory_bytes = uint64_t{1} << 30;
  StatusOr<DataLoaderTuneResult> dataloader =
      PlanDataLoaderTrace({kGolden, budgets, tuner::Objective::kMax, ""});
  ASSERT_TRUE(dataloader.ok()) << dataloader.status().message();
  EngineTuneResult result;
  result.dataloader = *dataloader;
  StatusOr<Json> equivalent = EngineConfigFromDataLoader(dataloader->run);
  ASSERT_TRUE(equivalent.ok()) << equivalent.status().message();
  result.equivalent = *equivalent;
  const double tuned = dataloader->plan.predicted_throughput;
  ASSERT_GT(tuned, 0);
  result.engine.plan.pipeline_name = "image_folder_preset_engine";
  result.engine.plan.predicted_throughput = 2.5 * tuned;
  result.calibration.seconds = 1;
  result.calibration.throughput = 80;
  result.calibration_trace = "out/engine.calibration.ptrace";
  result.output = "out/engine.json";
  result.code_change = "loader = pipetune.Loader(\"/abs/out/engine.json\")";

  std::string text = FormatEngineTune(result);
  EXPECT_THAT(text,
              HasSubstr("files -> repeat -> read -> decode -> random_resized_crop -> normalize -> batch -> "
                        "prefetch"));
  EXPECT_THAT(text, HasSubstr("shuffle=True, drop_last=True)"));
  EXPECT_THAT(text, HasSubstr("80.0 batches/s (out/engine.calibration.ptrace)"));
  EXPECT_EQ(RowAfter(text, "DataLoader, measured"),
            fmt::format("{:.1f} {:.0f} num_workers=0", dataloader->plan.measured_throughput,
                        3 * dataloader->plan.measured_throughput));
  EXPECT_EQ(RowAfter(text, "engine, tuned config (predicted)"),
            fmt::format("{:.1f} {:.0f} 2.50x the tuned DataLoader", 2.5 * tuned, 3 * 2.5 * tuned));
  EXPECT_THAT(text, HasSubstr("tuned engine config: out/engine.json"));
  EXPECT_THAT(text, HasSubstr("code change: loader = pipetune.Loader(\"/abs/out/engine.json\")  in place of  "
                              "loader = DataLoader(...)"));

  Json json = EngineTuneToJson(result);
  EXPECT_DOUBLE_EQ(json["dataloader"]["tuned_predicted_batches_per_second"].get<double>(), tuned);
  EXPECT_EQ(json["dataloader"]["tuned_kwargs"]["num_workers"], dataloader->dataloader_kwargs["num_workers"]);
  EXPECT_EQ(json["output"], "out/engine.json");
  EXPECT_EQ(json["code_change"], result.code_change);
}

}  // namespace
}  // namespace pipetune::workflow

// The decode-and-crop fusion as `pipetune tune` proposes it: a graph change
// with its predicted gain and reason, written into the tuned config, and
// left out (with a note) when the model says it does not pay.
#include "pipetune/tuner/fusion.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "pipetune/models/decode_crop.h"
#include "pipetune/tuner/plan_report.h"
#include "pipetune/tuner/rewrite.h"
#include "test_profiles.h"

// A named namespace: the unity build puts every test file in one translation
// unit, where anonymous namespaces would share names.
namespace pipetune::tuner::fusion_test {
namespace {

using testing::Budget;
using ::testing::HasSubstr;
using testing::MakeInput;
using testing::StageCost;

const char* kImageTrain = R"({
  "name": "image_train",
  "resources": { "cores": 2, "memory": "4GiB" },
  "stages": [
    { "name": "files",     "op": "list_files", "args": { "pattern": "data/*.jpg" } },
    { "name": "repeat",    "op": "repeat" },
    { "name": "read",      "op": "read_file", "parallelism": 1 },
    { "name": "decode",    "op": "map", "fn": "jpeg_decode", "args": { "fast_dct": false }, "parallelism": 1 },
    { "name": "augment",   "op": "map", "fn": "random_crop_flip", "args": { "size": 224, "scale": [0.08, 1.0] },
                           "parallelism": 1, "random": true },
    { "name": "normalize", "op": "map", "fn": "normalize", "parallelism": 1 },
    { "name": "batch",     "op": "batch", "args": { "size": 64 } },
    { "name": "prefetch",  "op": "prefetch", "buffer": 1 }
  ]
})";

// Decoded 500 x 375 RGB images; decode 1.2 ms, crop 0.15 ms of CPU each.
TuneInput ImageInput(double decode_ms, double crop_ms) {
  return MakeInput(kImageTrain,
                   {{"read", {0.05, 0.2, 110e3}},
                    {"decode", {decode_ms, decode_ms, 500 * 375 * 3}},
                    {"augment", {crop_ms, crop_ms, 224 * 224 * 3}},
                    {"normalize", {0.04, 0.04, 224 * 224 * 12}}},
                   /*cores=*/2, /*outputs=*/10);
}

TEST(FusionTest, ProposedAsAGraphChangeWithGainAndReason) {
  const TuneInput input = ImageInput(1.2, 0.15);
  StatusOr<Plan> plain = Solve(input, Budget(2), Objective::kMax);
  StatusOr<Plan> plan = SolveWithRewrites(input, Budget(2), Objective::kMax);
  ASSERT_TRUE(plain.ok() && plan.ok()) << plan.status().message();
  ASSERT_EQ(plan->rewrites.size(), 1u);
  const GraphRewrite& rewrite = plan->rewrites[0];
  EXPECT_EQ(rewrite.stages, (std::vector<std::string>{"decode", "augment"}));
  EXPECT_GT(rewrite.predicted_gain, 1.2);  // decode is ~85% of the CPU and a crop needs ~70% of it
  EXPECT_NEAR(plan->predicted_throughput / plain->predicted_throughput, rewrite.predicted_gain, 1e-9);
  EXPECT_THAT(rewrite.reason, HasSubstr("CPU per image"));
  // "Before" is the pipeline as traced.
  EXPECT_EQ(plan->predicted_throughput_before, plain->predicted_throughput_before);
  // Both stages show as changed, with the reason.
  ASSERT_GE(plan->knobs.size(), 2u);
  EXPECT_EQ(plan->knobs[0].stage, "decode");
  EXPECT_EQ(plan->knobs[0].knob, Knob::kStage);
  EXPECT_EQ(plan->knobs[0].new_value, "jpeg_decode crop_size 224");
  EXPECT_EQ(plan->knobs[1].stage, "augment");
  EXPECT_EQ(plan->knobs[1].new_value, "-");
}

TEST(FusionTest, TheTunedConfigHasTheFusedStage) {
  const TuneInput input = ImageInput(1.2, 0.15);
  StatusOr<Plan> plan = SolveWithRewrites(input, Budget(2), Objective::kMax);
  ASSERT_TRUE(plan.ok()) << plan.status().message();
  StatusOr<models::PipelineConfig> tuned = ApplyPlan(*input.config, *plan);
  ASSERT_TRUE(tuned.ok()) << tuned.status().message();
  EXPECT_FALSE(tuned->FindStage("augment").has_value());
  const models::StageConfig& decode = tuned->stages[*tuned->FindStage("decode")];
  EXPECT_EQ(decode.fn, "jpeg_decode");
  EXPECT_TRUE(decode.random);
  EXPECT_EQ(decode.args.at("crop_size"), 224);
  EXPECT_EQ(decode.args.at("scale"), Json::array({0.08, 1.0}));
  EXPECT_EQ(decode.args.at("fast_dct"), false);  // the decoder's own args stay
  EXPECT_GT(decode.parallelism, 1);              // and its knobs are tuned
  EXPECT_THAT(models::Serialize(*tuned), ::testing::Not(HasSubstr("random_crop_flip")));
}

TEST(FusionTest, NotProposedWhenTheDecodeIsCheap) {
  // The crop dominates: fusing saves a share of almost nothing.
  const TuneInput input = ImageInput(0.02, 1.5);
  StatusOr<Plan> plan = SolveWithRewrites(input, Budget(2), Objective::kMax);
  ASSERT_TRUE(plan.ok()) << plan.status().message();
  EXPECT_TRUE(plan->rewrites.empty());
  bool noted = false;
  for (const std::string& note : plan->notes)
    noted = noted ||
            (note.find("not rewritten") != std::string::npos && note.find("window") != std::string::npos);
  EXPECT_TRUE(noted);
  StatusOr<models::PipelineConfig> tuned = ApplyPlan(*input.config, *plan);
  ASSERT_TRUE(tuned.ok());
  EXPECT_TRUE(tuned->FindStage("augment").has_value());
}

TEST(FusionTest, APlanOfAnotherPipelineIsRefused) {
  const TuneInput input = ImageInput(1.2, 0.15);
  StatusOr<Plan> plan = SolveWithRewrites(input, Budget(2), Objective::kMax);
  ASSERT_TRUE(plan.ok() && !plan->rewrites.empty());
  models::PipelineConfig other = *input.config;
  other.stages[4].fn = "normalize";  // no crop after the decode any more
  StatusOr<models::PipelineConfig> tuned = ApplyPlan(other, *plan);
  ASSERT_FALSE(tuned.ok());
  EXPECT_THAT(tuned.status().message(), HasSubstr("another pipeline"));
}

// normalize after the windowed decode folds into its output loop (the
// engine's chain fold): the same floats for less work, so the tuner makes it
// one stage although the model predicts well under kMinRewriteGain for it;
// the same fusion where nothing says it folds is declined with a note.
TEST(FusionTest, AFoldIsMadeWithoutAPredictedGainAndOtherFusionsAreNot) {
  TuneInput input = ImageInput(1.2, 0.15);
  input.profile.handoff_cpu_seconds = 2e-6;  // x1.00 predicted for any map fusion
  StatusOr<Plan> unfolded = SolveWithRewrites(input, Budget(2), Objective::kMax);
  input.folds = [](const models::StageConfig& first, const models::StageConfig& second) {
    return first.fn == "jpeg_decode" && first.args.contains("crop_size") && second.fn == "normalize";
  };
  StatusOr<Plan> folded = SolveWithRewrites(input, Budget(2), Objective::kMax);
  ASSERT_TRUE(unfolded.ok() && folded.ok()) << folded.status().message();

  ASSERT_EQ(unfolded->rewrites.size(), 1u);
  EXPECT_EQ(unfolded->rewrites[0].kind, kFuseDecodeCrop);
  EXPECT_THAT(FormatPlanText(*unfolded), HasSubstr("not rewritten"));

  ASSERT_EQ(folded->rewrites.size(), 2u);
  EXPECT_EQ(folded->rewrites[1].kind, kFuseMaps);
  EXPECT_EQ(folded->rewrites[1].stages, (std::vector<std::string>{"decode", "normalize"}));
  EXPECT_THAT(folded->rewrites[1].reason, HasSubstr("folds into the pass of \"decode\""));
  EXPECT_LT(folded->predicted_throughput, unfolded->predicted_throughput * (1 + kMinRewriteGain));
  EXPECT_GE(folded->predicted_throughput, unfolded->predicted_throughput);
  StatusOr<models::PipelineConfig> tuned = ApplyPlan(*input.config, *folded);
  ASSERT_TRUE(tuned.ok()) << tuned.status().message();
  EXPECT_FALSE(tuned->FindStage("normalize").has_value());
  const models::StageConfig& decode = tuned->stages[*tuned->FindStage("decode")];
  EXPECT_EQ(decode.fn, "chain");
  EXPECT_EQ(decode.args["steps"][0]["args"]["crop_size"], 224);
  EXPECT_EQ(decode.args["steps"][1]["fn"], "normalize");
}

// A fold is made whatever order the tuner composes its rewrites in: here the
// plan that wins moves the repeat after the decode to cache the decoded
// images, and the fold of normalize into the crop comes first in the
// alternative's rewrites; it is still made without the 3% bar (the image
// example's demo, where it had been left out).
TEST(FusionTest, AFoldBesideAMovedRepeatIsMade) {
  TuneInput input = ImageInput(1.2, 0.15);
  input.profile.source_elements_per_epoch = 200;  // 200 files: 112 MB of decoded images
  input.profile.handoff_cpu_seconds = 2e-6;
  StatusOr<Plan> unfolded = SolveWithRewrites(input, Budget(2), Objective::kMax);
  input.folds = [](const models::StageConfig& first, const models::StageConfig& second) {
    return first.fn == "random_crop_flip" && second.fn == "normalize";
  };
  StatusOr<Plan> folded = SolveWithRewrites(input, Budget(2), Objective::kMax);
  ASSERT_TRUE(unfolded.ok() && folded.ok()) << folded.status().message();

  auto kinds = [](const Plan& plan) {
    std::vector<std::string> out;
    for (const GraphRewrite& rewrite : plan.rewrites) out.push_back(rewrite.kind);
    return out;
  };
  EXPECT_THAT(kinds(*unfolded), ::testing::ElementsAre(kMoveRepeat));
  ASSERT_THAT(kinds(*folded), ::testing::UnorderedElementsAre(kMoveRepeat, kFuseMaps));
  for (const GraphRewrite& rewrite : folded->rewrites) {
    if (rewrite.kind != kFuseMaps) continue;
    EXPECT_EQ(rewrite.stages, (std::vector<std::string>{"augment", "normalize"}));
    EXPECT_THAT(rewrite.reason, HasSubstr("folds into the pass of \"augment\""));
  }
  EXPECT_GE(folded->predicted_throughput, unfolded->predicted_throughput);
}

TEST(DecodeCropShareTest, ACropOfTheWholeImageCostsTheWholeDecode) {
  // scale [1, 1] with the image's own aspect: every crop is the whole image.
  const models::DecodeCropShare whole =
      models::EstimateDecodeCropShare(480, 360, {1.0, 1.0, 4.0 / 3, 4.0 / 3});
  EXPECT_NEAR(whole.rows, 1.0, 1e-9);
  EXPECT_NEAR(whole.pixels, 1.0, 1e-9);
  EXPECT_NEAR(whole.cost, 1.0, 1e-9);
  // ImageNet's default: about 0.43 of the area, placed anywhere.
  const models::DecodeCropShare typical = models::EstimateDecodeCropShare(480, 360, {});
  EXPECT_GT(typical.rows, typical.pixels);  // every row above the crop is entropy-decoded
  EXPECT_GT(typical.pixels, 0.4);
  EXPECT_LT(typical.cost, 0.8);
  // Small crops decode little.
  const models::DecodeCropShare small = models::EstimateDecodeCropShare(480, 360, {0.05, 0.05, 1.0, 1.0});
  EXPECT_LT(small.cost, typical.cost);
}

}  // namespace
}  // namespace pipetune::tuner::fusion_test

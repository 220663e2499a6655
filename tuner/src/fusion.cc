// Graph rewrites the tuner proposes (fusion.h).
#include "pipetune/tuner/fusion.h"

#include <fmt/format.h>

#include "pipetune/models/decode_crop.h"

namespace pipetune::tuner {
namespace {

constexpr const char* kFuseDecodeCrop = "fuse_decode_crop";

// Index shift for a profile index when the stage at `removed` goes.
void Shift(std::optional<size_t>& index, size_t removed) {
  if (index && *index > removed) --*index;
}

// The fused stage's profile: the decode's, with the CPU and latency of the
// share `cost` of its decode plus the whole crop, and the crop's output.
models::StageProfile FusedStage(const models::StageProfile& decode, const models::StageProfile& crop,
                                double cost) {
  models::StageProfile fused = decode;
  fused.random = true;
  fused.cpu_seconds_per_element = decode.cpu_seconds_per_element * cost + crop.cpu_seconds_per_element;
  fused.latency_seconds = decode.latency_seconds * cost + crop.latency_seconds;
  fused.measured_latency_seconds = decode.measured_latency_seconds * cost + crop.measured_latency_seconds;
  fused.cpu_seconds = fused.cpu_seconds_per_element * fused.elements;
  fused.work_seconds = fused.measured_latency_seconds * fused.elements;
  fused.bytes_per_element = crop.bytes_per_element;
  fused.bytes = crop.bytes;
  fused.visit_ratio = crop.visit_ratio;
  fused.cpu_seconds_per_output = fused.cpu_seconds_per_element * fused.visit_ratio;
  fused.latency_bound = fused.latency_seconds > 2 * fused.cpu_seconds_per_element;
  // The fitted curve keeps its shape; one worker's rate follows the latency.
  if (fused.scaling.lambda > 0 && fused.latency_seconds > 0) {
    fused.scaling.lambda *= decode.latency_seconds / fused.latency_seconds;
  }
  return fused;
}

std::string Describe(const models::StageConfig& decode, const models::StageConfig& crop) {
  const std::string size =
      crop.args.is_object() && crop.args.contains("size") ? crop.args["size"].dump() : "?";
  return fmt::format(
      "\"{}\" + \"{}\" -> \"{}\": jpeg_decode with crop_size {}, decoding only the crop's window",
      decode.name, crop.name, decode.name, size);
}

// Whether `fused` is the better plan (fusion.h's rule).
bool Pays(const Plan& plain, const Plan& fused, Objective objective) {
  if (objective == Objective::kDemand && fused.demand_met) {
    if (!plain.demand_met) return true;
    if (fused.cores_needed != plain.cores_needed) return fused.cores_needed < plain.cores_needed;
  }
  return fused.predicted_throughput >= plain.predicted_throughput * (1 + kMinRewriteGain);
}

void AddStageChanges(const GraphRewrite& rewrite, const std::string& decode_size, Plan& plan) {
  std::vector<KnobChange> changes;
  changes.push_back({rewrite.stages[0], Knob::kStage, "jpeg_decode", "jpeg_decode crop_size " + decode_size,
                     true, fmt::format("fused with \"{}\": {}", rewrite.stages[1], rewrite.reason)});
  changes.push_back({rewrite.stages[1], Knob::kStage, "random_crop_flip", "-", true,
                     fmt::format("done by \"{}\" now (predicted x{:.2f} throughput)", rewrite.stages[0],
                                 rewrite.predicted_gain)});
  plan.knobs.insert(plan.knobs.begin(), changes.begin(), changes.end());
}

}  // namespace

std::optional<RewrittenInput> ProposeDecodeCropFusion(const TuneInput& input) {
  if (!input.config) return std::nullopt;
  const models::Profile& profile = input.profile;
  std::optional<models::DecodeCropPrice> price = models::PriceDecodeCropFusion(*input.config, profile);
  if (!price) return std::nullopt;
  StatusOr<models::PipelineConfig> fused_config = models::FuseDecodeCrop(*input.config, price->pair);
  if (!fused_config.ok()) return std::nullopt;
  const models::StageConfig& decode_config = input.config->stages[price->pair.decode];
  const models::StageConfig& crop_config = input.config->stages[price->pair.crop];

  RewrittenInput rewritten{input, {}, {}};
  rewritten.input.config = std::move(fused_config).value();
  models::Profile& fused = rewritten.input.profile;
  fused.stages[price->decode_stage] =
      FusedStage(profile.stages[price->decode_stage], profile.stages[price->crop_stage], price->share.cost);
  fused.stages.erase(fused.stages.begin() + static_cast<std::ptrdiff_t>(price->crop_stage));
  Shift(fused.storage_stage, price->crop_stage);
  Shift(fused.cache_stage, price->crop_stage);
  const std::string entropy_source =
      price->entropy_measured
          ? fmt::format("measured on {} of the pipeline's files on this host", profile.jpeg_entropy->files)
          : std::string("assumed: the pipeline's files could not be read to measure it");
  rewritten.pricing = fmt::format(
      "\"{}\" fused with \"{}\" is priced at {:.2f} of the measured decode (a crop needs {:.0f}% of the rows "
      "entropy-decoded and {:.0f}% of the pixels transformed; {:.0f}% of a decode's CPU is entropy decoding, "
      "{}) plus the measured crop",
      decode_config.name, crop_config.name, price->share.cost, 100 * price->share.rows,
      100 * price->share.pixels, 100 * price->share.entropy_share, entropy_source);
  fused.assumptions.push_back(rewritten.pricing);

  GraphRewrite& rewrite = rewritten.rewrite;
  rewrite.kind = kFuseDecodeCrop;
  rewrite.stages = {decode_config.name, crop_config.name};
  rewrite.description = Describe(decode_config, crop_config);
  rewrite.reason = fmt::format(
      "a random crop needs {:.0f}% of the decode's work on average; CPU per image {:.0f} -> {:.0f} us",
      100 * price->share.cost, price->separate_cpu_seconds * 1e6, price->fused_cpu_seconds * 1e6);
  return rewritten;
}

StatusOr<Plan> SolveWithRewrites(const TuneInput& input, const Resources& resources, Objective objective,
                                 const SolverOptions& options) {
  PIPETUNE_ASSIGN_OR_RETURN(Plan plain, Solve(input, resources, objective, options));
  std::optional<RewrittenInput> rewritten = ProposeDecodeCropFusion(input);
  if (!rewritten) return plain;
  StatusOr<Plan> fused = Solve(rewritten->input, resources, objective, options);
  if (!fused.ok()) {
    plain.notes.push_back("not fused (" + rewritten->rewrite.description + "): " + fused.status().message());
    return plain;
  }
  const double gain =
      plain.predicted_throughput > 0 ? fused->predicted_throughput / plain.predicted_throughput : 1;
  if (!Pays(plain, *fused, objective)) {
    plain.notes.push_back(
        fmt::format("not fused ({}): predicted x{:.2f} throughput, within the model's error",
                    rewritten->rewrite.description, gain));
    return plain;
  }
  Plan plan = std::move(fused).value();
  // "Before" is the pipeline as traced, not as rewritten.
  plan.measured_throughput = plain.measured_throughput;
  plan.predicted_throughput_before = plain.predicted_throughput_before;
  GraphRewrite rewrite = std::move(rewritten->rewrite);
  rewrite.predicted_gain = gain;
  const models::StageConfig& crop = input.config->stages[*input.config->FindStage(rewrite.stages[1])];
  AddStageChanges(rewrite, crop.args.contains("size") ? crop.args["size"].dump() : "?", plan);
  plan.notes.push_back(fmt::format("graph rewrite: {} (predicted x{:.2f} over the best plan without it)",
                                   rewrite.description, gain));
  plan.notes.push_back(std::move(rewritten->pricing));
  plan.rewrites.push_back(std::move(rewrite));
  return plan;
}

StatusOr<models::PipelineConfig> ApplyRewrites(const models::PipelineConfig& config,
                                               const std::vector<GraphRewrite>& rewrites) {
  models::PipelineConfig current = config;
  for (const GraphRewrite& rewrite : rewrites) {
    if (rewrite.kind != kFuseDecodeCrop || rewrite.stages.size() != 2) {
      return InvalidInput(
          fmt::format("unknown graph rewrite \"{}\": a plan of a newer pipetune?", rewrite.kind));
    }
    std::optional<models::DecodeCropPair> pair = models::FindDecodeCropPair(current);
    if (!pair || current.stages[pair->decode].name != rewrite.stages[0] ||
        current.stages[pair->crop].name != rewrite.stages[1]) {
      return InvalidInput(
          fmt::format("the plan fuses \"{}\" (jpeg_decode) with \"{}\" (random_crop_flip), which the config "
                      "does not have "
                      "one after the other: a plan of another pipeline?",
                      rewrite.stages[0], rewrite.stages[1]));
    }
    PIPETUNE_ASSIGN_OR_RETURN(current, models::FuseDecodeCrop(current, *pair));
  }
  return current;
}

}  // namespace pipetune::tuner

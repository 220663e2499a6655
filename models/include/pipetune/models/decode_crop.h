// The decode-and-crop fusion, as the model sees it: where a config decodes
// JPEGs (jpeg_decode) and then takes a random resized crop of them
// (random_crop_flip), jpeg_decode with `crop_size` does both and decodes only
// the crop's window, with the same pixels (docs/image-example.md). This
// header finds such pairs and prices the fused stage from the separate
// stages' measured costs, before anything runs: the report mentions it and
// the tuner proposes it (pipetune/tuner/fusion.h).
//
// The price: a JPEG's decode is entropy (Huffman) decoding, which must read
// every row down to the crop's last one, and the pixel work (IDCT, chroma
// upsampling, colour conversion), which the fused decode does only for the
// crop's rows and the 16-pixel columns (iMCUs) around it. So the fused stage
// costs
//   decode CPU x (kEntropyShare x rows + (1 - kEntropyShare) x pixels)
//     + the crop's CPU
// with `rows` and `pixels` the mean shares a crop needs, computed from the
// crop's sampling args and the decoded image size.
#pragma once

#include <cstddef>
#include <optional>
#include <string>

#include "pipetune/models/config.h"
#include "pipetune/models/profile.h"

namespace pipetune::models {

// Entropy decoding's share of a whole-image decode's CPU when it could not be
// measured on the pipeline's own files (Profile::jpeg_entropy): measured on
// the image example's files (quality 90, 4:2:0, ~107 KB) on one machine,
// where decoding only the crop's window took 0.69 of the whole decode for
// rows 0.83 and pixels 0.44 (bench/image: pipetune_image_bench stages). On
// another CPU (an AMD EPYC with AVX-512, faster at the pixel work) the same
// files gave 0.78-0.79: hence the measurement where the files are at hand.
inline constexpr double kEntropyShare = 0.6;

// torchvision's RandomResizedCrop parameters, as random_crop_flip takes them.
struct CropSampling {
  double scale_min = 0.08, scale_max = 1.0;
  double ratio_min = 3.0 / 4.0, ratio_max = 4.0 / 3.0;
};

// Mean shares over crops drawn as random_crop_flip draws them.
struct DecodeCropShare {
  double rows = 1;                       // rows entropy-decoded: down to the crop's last row
  double pixels = 1;                     // pixels transformed: the crop's rows x its iMCU-aligned columns
  double entropy_share = kEntropyShare;  // the formula's
  double cost = 1;                       // share of the whole decode's CPU (the formula above)
};

// For an image `width` x `height` (>= 1). Deterministic (a fixed-seed
// sample of 4000 crops).
DecodeCropShare EstimateDecodeCropShare(double width, double height, const CropSampling& sampling,
                                        double entropy_share = kEntropyShare);

// A jpeg_decode map stage followed directly by a random_crop_flip one, the
// decode without a crop of its own. Indices into config.stages.
struct DecodeCropPair {
  size_t decode = 0;
  size_t crop = 0;
  CropSampling sampling;  // the crop stage's args (defaults where absent)
};
std::optional<DecodeCropPair> FindDecodeCropPair(const PipelineConfig& config);

// The fused stage's price for a traced run: the pair in `config`, their
// stages in `profile` (adjacent), and the CPU per element before and after.
// nullopt when the config has no pair or the profile does not show both
// stages working.
struct DecodeCropPrice {
  DecodeCropPair pair;
  size_t decode_stage = 0;  // indices into profile.stages
  size_t crop_stage = 0;
  DecodeCropShare share;            // for the decoded images' mean size, assumed 4:3
  bool entropy_measured = false;    // share.entropy_share is profile.jpeg_entropy's
  double separate_cpu_seconds = 0;  // per element: decode + crop, as measured
  double fused_cpu_seconds = 0;     // decode x share.cost + crop
};
std::optional<DecodeCropPrice> PriceDecodeCropFusion(const PipelineConfig& config, const Profile& profile);

// The sentence the report adds about it: what fusing would save and that
// `pipetune tune` proposes it.
std::string DescribeDecodeCropFusion(const PipelineConfig& config, const DecodeCropPrice& price);

// The config with the pair fused: the decode stage keeps its name, knobs and
// decoder args and takes the crop's (size as crop_size; scale, ratio,
// flip_probability, antialias), becomes random, and the crop stage is gone.
// Errors (kInvalidInput): no such pair at those indices; the result does not
// validate.
StatusOr<PipelineConfig> FuseDecodeCrop(const PipelineConfig& config, const DecodeCropPair& pair);

}  // namespace pipetune::models

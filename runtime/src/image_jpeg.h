// JPEG decoding through TurboJPEG (libjpeg-turbo's 2.x API), with a
// decompressor per call: handles are not thread-safe (the element function
// that decodes is shared by every worker of its stage), and a handle keeps
// the tables of the last image it read, which a file lacking its own must
// not decode with. A decode depends on its file alone.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "image_kernels.h"
#include "pipetune/base/status.h"

namespace pipetune::runtime::image {

struct JpegInfo {
  int width = 0;
  int height = 0;
};

struct JpegDecodeOptions {
  // DCT-domain downscale: 1, 2, 4 or 8. libjpeg-turbo then runs a reduced
  // IDCT and converts and upsamples only the smaller image; the entropy
  // decoding, usually the larger part of the cost, is the same.
  int scale_down = 1;
  bool fast_dct = false;       // TJFLAG_FASTDCT: the integer "ifast" IDCT
  bool fast_upsample = false;  // TJFLAG_FASTUPSAMPLE: no fancy chroma upsampling
  // libjpeg warnings (corrupt data it could recover from) fail the decode.
  // Without it only truncation ("Premature end of JPEG file") does, which is
  // what Pillow and tf.image.decode_jpeg do by default.
  bool strict = false;
};

// Reads the header. Errors (kFailed) carry libjpeg's message.
StatusOr<JpegInfo> ReadJpegInfo(const uint8_t* data, size_t size);

// Output size of a dimension after a 1/scale_down DCT-domain scale (rounds up).
int ScaledDimension(int dimension, int scale_down);

// Decodes to interleaved RGB (grayscale is expanded) into `out`, which holds
// ScaledDimension(height) rows of ScaledDimension(width) * 3 bytes.
Status DecodeJpeg(const uint8_t* data, size_t size, const JpegInfo& info, const JpegDecodeOptions& options,
                  uint8_t* out);

// Decodes only the part of the image that `region` covers (in the scaled
// image's pixels, 1/options.scale_down) into `scratch` (grown as needed,
// never shrunk: it may be larger than the window), through libjpeg's own
// API (TurboJPEG 2.1 has no cropped decode): rows above the region are
// entropy-decoded and skipped (jpeg_skip_scanlines: no IDCT, upsampling or
// colour conversion), rows below it are not decoded at all, and only the
// iMCU columns (8-32 pixels) around the region are transformed
// (jpeg_crop_scanline; a progressive JPEG's are all transformed, see the
// .cc). The returned view's left and top place the window in
// the whole scaled image; ResampleCrop takes it as it is.
//
// Exactness: every pixel inside `region` equals the whole-image decode's
// (DecodeJpeg with the same options). The window is widened by a few pixels
// where the image goes on, so that chroma upsampling at the window's edges
// sees the same neighbours.
//
// Errors as DecodeJpeg's, with one difference: the data below the region is
// never read, so corruption there goes unnoticed; truncation is still an
// error (the EOI marker is looked for at the end of the data).
// Preconditions: `region` non-empty and inside the scaled image.
StatusOr<ImageView> DecodeJpegRegion(const uint8_t* data, size_t size, const JpegDecodeOptions& options,
                                     const PixelCrop& region, std::vector<uint8_t>& scratch);

// The same with the region chosen from the header, which is read once: the
// fused decode-and-crop draws its crop from the image's size. `choose` gets
// the unscaled size and returns the DCT scale (options.scale_down is
// ignored) and the region in that scale's pixels, or an error, which the
// decode returns.
struct RegionRequest {
  int scale_down = 1;
  PixelCrop region;
};
using RegionChooser = std::function<StatusOr<RegionRequest>(const JpegInfo& header)>;
StatusOr<ImageView> DecodeJpegRegion(const uint8_t* data, size_t size, const JpegDecodeOptions& options,
                                     const RegionChooser& choose, std::vector<uint8_t>& scratch);

}  // namespace pipetune::runtime::image

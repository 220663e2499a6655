// libFuzzer target for JPEG decoding, the engine's parser of users' files:
// jpeg_decode's whole-image decode and the fused op's window decode (our
// libjpeg driver: setjmp error recovery, jpeg_crop_scanline and
// jpeg_skip_scanlines, the end-marker check). Any bytes must decode or be
// refused with a Status, never crash, hang or read out of bounds, and a
// window that decodes must hold the whole decode's pixels.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "image_jpeg.h"
#include "pipetune/base/check.h"

namespace image = pipetune::runtime::image;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto info = image::ReadJpegInfo(data, size);
  if (!info.ok()) {
    PIPETUNE_CHECK(!info.status().message().empty());
    return 0;
  }
  // Bound the work per input: a header may claim 65535 x 65535.
  if (info->width <= 0 || info->height <= 0 || static_cast<int64_t>(info->width) * info->height > 1 << 20) {
    return 0;
  }
  const image::JpegDecodeOptions options;
  std::vector<uint8_t> whole(static_cast<size_t>(info->width) * info->height * 3);
  const bool whole_ok = image::DecodeJpeg(data, size, *info, options, whole.data()).ok();
  // A window from the input's last bytes, inside the image.
  const uint8_t a = data[size - 1], b = size > 1 ? data[size - 2] : 0;
  image::PixelCrop region;
  region.x = a % info->width;
  region.y = b % info->height;
  region.width = std::max(1, (info->width - region.x) / (1 + a % 3));
  region.height = std::max(1, (info->height - region.y) / (1 + b % 3));
  std::vector<uint8_t> scratch;
  auto window = image::DecodeJpegRegion(data, size, options, region, scratch);
  if (!window.ok()) {
    PIPETUNE_CHECK(!window.status().message().empty());
    return 0;
  }
  // Compare only clean files: libjpeg recovers from corrupt data in ways that
  // need not match between the two drivers, and corruption below the window
  // goes unnoticed there, by contract.
  image::JpegDecodeOptions strict;
  strict.strict = true;
  if (!whole_ok || !image::DecodeJpeg(data, size, *info, strict, whole.data()).ok()) return 0;
  // Every pixel of the region as the whole decode has it.
  const image::ImageView& v = *window;
  for (int y = region.y; y < region.y + region.height; ++y) {
    const uint8_t* got = v.data + static_cast<ptrdiff_t>(y - v.top) * v.stride + (region.x - v.left) * 3;
    const uint8_t* want = whole.data() + (static_cast<size_t>(y) * info->width + region.x) * 3;
    PIPETUNE_CHECK(std::memcmp(got, want, static_cast<size_t>(region.width) * 3) == 0);
  }
  return 0;
}

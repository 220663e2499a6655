// DecodeJpegRegion: a cropped decode through libjpeg's API (libjpeg-turbo
// 2.1's jpeg_skip_scanlines and jpeg_crop_scanline), which TurboJPEG 2.1 does
// not expose. A decompressor per call (see LibjpegDecompressor).
//
// libjpeg reports errors by calling error_exit, which must not return; as
// libjpeg's own example does, it longjmps back to the setjmp in
// DecodeWindow. Everything between the two is C (libjpeg's frames and ours,
// with trivially destructible locals only), so no destructor is skipped.
#include <csetjmp>
#include <cstdio>  // jpeglib.h uses FILE without including it
#include <cstring>

#include "image_jpeg.h"
// jerror.h needs jpeglib.h first.
// clang-format off
#include <jpeglib.h>
#include <jerror.h>
// clang-format on

namespace pipetune::runtime::image {
namespace {

// Pixels beyond the region on each side (where the image goes on) that the
// window also decodes: fancy chroma upsampling reads one chroma sample
// beyond each output pixel, and at a window's edge libjpeg replicates the
// edge sample instead. Two output pixels cover 2x subsampling.
constexpr int kEdgeMargin = 2;

struct ErrorManager {
  jpeg_error_mgr pub;  // first: libjpeg sees a jpeg_error_mgr*
  std::jmp_buf jump;
  bool strict = false;
  char message[JMSG_LENGTH_MAX] = {};
};

[[noreturn]] void ExitWithMessage(j_common_ptr cinfo) {
  auto* error = reinterpret_cast<ErrorManager*>(cinfo->err);
  (*cinfo->err->format_message)(cinfo, error->message);
  std::longjmp(error->jump, 1);
}

// Warnings (level -1) are what TurboJPEG treats as warnings: fatal in strict
// mode; otherwise only truncation is, as in DecodeJpeg. Trace messages
// (level >= 0) are dropped.
void OnMessage(j_common_ptr cinfo, int level) {
  if (level >= 0) return;
  auto* error = reinterpret_cast<ErrorManager*>(cinfo->err);
  if (error->strict || cinfo->err->msg_code == JWRN_JPEG_EOF) ExitWithMessage(cinfo);
  cinfo->err->num_warnings++;
}

// A decompressor per call, as image_jpeg.cc's: libjpeg keeps the tables of
// the last image an object read, and a file that lacks one would decode with
// another file's (found by fuzz/jpeg_decode_fuzz.cc: the window and the
// whole decode of one file differed after different previous files).
class LibjpegDecompressor {
 public:
  LibjpegDecompressor() {
    info_.err = jpeg_std_error(&error_.pub);
    error_.pub.error_exit = ExitWithMessage;
    error_.pub.emit_message = OnMessage;
    jpeg_create_decompress(&info_);
  }
  ~LibjpegDecompressor() { jpeg_destroy_decompress(&info_); }
  LibjpegDecompressor(const LibjpegDecompressor&) = delete;
  LibjpegDecompressor& operator=(const LibjpegDecompressor&) = delete;

  jpeg_decompress_struct* info() { return &info_; }
  ErrorManager* error() { return &error_; }

 private:
  ErrorManager error_;
  jpeg_decompress_struct info_;
};

// Where the decoded window lies in the scaled image.
struct Window {
  int left = 0, top = 0, width = 0, height = 0;
  int image_width = 0, image_height = 0;
};

// Reads the header (the first step of every decode). Returns false with the
// error manager's message set when libjpeg fails.
bool ReadHeader(jpeg_decompress_struct* info, ErrorManager* error, const uint8_t* data, size_t size,
                bool strict) {
  if (setjmp(error->jump) != 0) {
    jpeg_abort_decompress(info);
    return false;
  }
  error->strict = strict;
  error->pub.num_warnings = 0;
  jpeg_mem_src(info, data, static_cast<unsigned long>(size));
  jpeg_read_header(info, TRUE);
  return true;
}

// After ReadHeader: decodes rows [region.y, region.y + region.height) of
// the columns around the region into `scratch`. Returns false with the error
// manager's message set when libjpeg fails. `scratch` is resized before the
// first row is read and not touched by libjpeg's error path.
bool DecodeWindow(jpeg_decompress_struct* info, ErrorManager* error, const JpegDecodeOptions& options,
                  const PixelCrop& region, std::vector<uint8_t>* scratch, Window* window) {
  if (setjmp(error->jump) != 0) {
    jpeg_abort_decompress(info);
    return false;
  }
  // What tjDecompress2 sets, and nothing else: the same pixels.
  info->out_color_space = JCS_EXT_RGB;
  info->scale_num = 1;
  info->scale_denom = static_cast<unsigned int>(options.scale_down);
  if (options.fast_dct) info->dct_method = JDCT_FASTEST;
  if (options.fast_upsample) info->do_fancy_upsampling = FALSE;
  jpeg_start_decompress(info);

  const int image_width = static_cast<int>(info->output_width);
  const int image_height = static_cast<int>(info->output_height);
  const int left = region.x > kEdgeMargin ? region.x - kEdgeMargin : 0;
  const int right = region.x + region.width + kEdgeMargin < image_width
                        ? region.x + region.width + kEdgeMargin
                        : image_width;
  const int top = region.y;
  const int bottom = region.y + region.height < image_height ? region.y + region.height : image_height;
  JDIMENSION x_offset = static_cast<JDIMENSION>(left);
  JDIMENSION width = static_cast<JDIMENSION>(right - left);
  // Aligns x_offset down to an iMCU boundary and widens `width` to match.
  // Not for a progressive JPEG: where its scans leave coefficients
  // incomplete, libjpeg smooths each block with its neighbours, and a
  // cropped row has no neighbours beyond the crop, so its edge blocks come
  // out other than in the whole decode (found by fuzz/jpeg_decode_fuzz.cc; a
  // regression in tests/runtime/regressions/). Its rows are still skipped.
  if (info->progressive_mode) {
    x_offset = 0;
    width = info->output_width;
  } else if (width < info->output_width) {
    jpeg_crop_scanline(info, &x_offset, &width);
  }
  if (top > 0) jpeg_skip_scanlines(info, static_cast<JDIMENSION>(top));

  const size_t row_bytes = static_cast<size_t>(width) * kChannels;
  // Grown, never shrunk: resizing up value-initialises (a memset of the new
  // tail) bytes libjpeg is about to overwrite, and windows vary from image to
  // image, so only a new largest window pays for it.
  const size_t window_bytes = row_bytes * static_cast<size_t>(bottom - top);
  if (scratch->size() < window_bytes) scratch->resize(window_bytes);
  while (static_cast<int>(info->output_scanline) < bottom) {
    constexpr int kRowsAtOnce = 4;
    JSAMPROW rows[kRowsAtOnce];
    const int done = static_cast<int>(info->output_scanline) - top;
    const int count = bottom - top - done < kRowsAtOnce ? bottom - top - done : kRowsAtOnce;
    for (int r = 0; r < count; ++r) rows[r] = scratch->data() + static_cast<size_t>(done + r) * row_bytes;
    jpeg_read_scanlines(info, rows, static_cast<JDIMENSION>(count));
  }
  // The rows below are never decoded: abort rather than finish.
  jpeg_abort_decompress(info);
  *window = {
      static_cast<int>(x_offset), top, static_cast<int>(width), bottom - top, image_width, image_height};
  return true;
}

// A complete JPEG ends with the EOI marker (FF D9), possibly followed by a
// little padding. Entropy-coded data never contains FF D9 (an FF byte there
// is followed by 00 or a restart marker), so finding it in the tail means
// the scan ran to its end.
bool HasEndMarker(const uint8_t* data, size_t size) {
  constexpr size_t kTail = 4096;
  const size_t from = size > kTail ? size - kTail : 0;
  for (size_t i = size; i-- > from + 1;) {
    if (data[i] == 0xD9 && data[i - 1] == 0xFF) return true;
  }
  return false;
}

}  // namespace

StatusOr<ImageView> DecodeJpegRegion(const uint8_t* data, size_t size, const JpegDecodeOptions& options,
                                     const RegionChooser& choose, std::vector<uint8_t>& scratch) {
  if (size == 0) return Failed("not a JPEG: the data is empty");
  LibjpegDecompressor decompressor;
  jpeg_decompress_struct* info = decompressor.info();
  ErrorManager* error = decompressor.error();
  if (!ReadHeader(info, error, data, size, options.strict)) {
    return Failed(std::string("not a JPEG (libjpeg: ") + error->message + ")");
  }
  const JpegInfo header{static_cast<int>(info->image_width), static_cast<int>(info->image_height)};
  if (header.width <= 0 || header.height <= 0) return Failed("JPEG header gives an empty image");
  PIPETUNE_ASSIGN_OR_RETURN(RegionRequest request, choose(header));
  JpegDecodeOptions scaled = options;
  scaled.scale_down = request.scale_down;
  Window window;
  if (!DecodeWindow(info, error, scaled, request.region, &scratch, &window)) {
    return Failed(std::string("corrupt JPEG (libjpeg: ") + error->message + ")");
  }
  if (!HasEndMarker(data, size)) return Failed("corrupt JPEG (libjpeg: Premature end of JPEG file)");
  return ImageView{scratch.data(),     window.image_height,
                   window.image_width, static_cast<ptrdiff_t>(window.width) * kChannels,
                   window.left,        window.top};
}

StatusOr<ImageView> DecodeJpegRegion(const uint8_t* data, size_t size, const JpegDecodeOptions& options,
                                     const PixelCrop& region, std::vector<uint8_t>& scratch) {
  return DecodeJpegRegion(
      data, size, options,
      [&](const JpegInfo&) -> StatusOr<RegionRequest> {
        return RegionRequest{options.scale_down, region};
      },
      scratch);
}

}  // namespace pipetune::runtime::image

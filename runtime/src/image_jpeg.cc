#include "image_jpeg.h"

#include <turbojpeg.h>

#include <cstring>

namespace pipetune::runtime::image {
namespace {

// A decompressor per call. A TurboJPEG handle is not thread-safe, and it
// keeps the Huffman and quantization tables of the last image it read: an
// image that lacks one (a corrupt or abbreviated file) would decode with
// whatever the thread's previous file left there, where a fresh handle uses
// libjpeg's standard tables or refuses it, as Pillow does. Creating one costs
// well under a microsecond, against hundreds for a decode.
class TurboDecompressor {
 public:
  TurboDecompressor() : handle_(tjInitDecompress()) {}
  ~TurboDecompressor() {
    if (handle_ != nullptr) tjDestroy(handle_);
  }
  TurboDecompressor(const TurboDecompressor&) = delete;
  TurboDecompressor& operator=(const TurboDecompressor&) = delete;
  StatusOr<tjhandle> Get() const {
    if (handle_ == nullptr)
      return Failed(std::string("cannot create a TurboJPEG decoder: ") + tjGetErrorStr2(nullptr));
    return handle_;
  }

 private:
  tjhandle handle_;
};

// TurboJPEG takes a non-const pointer in its 2.x API but does not write.
unsigned char* Input(const uint8_t* data) { return const_cast<unsigned char*>(data); }

}  // namespace

StatusOr<JpegInfo> ReadJpegInfo(const uint8_t* data, size_t size) {
  const TurboDecompressor decompressor;
  PIPETUNE_ASSIGN_OR_RETURN(tjhandle handle, decompressor.Get());
  if (size == 0) return Failed("not a JPEG: the data is empty");
  int width = 0, height = 0, subsampling = 0, colorspace = 0;
  if (tjDecompressHeader3(handle, Input(data), static_cast<unsigned long>(size), &width, &height,
                          &subsampling, &colorspace) != 0) {
    return Failed(std::string("not a JPEG (libjpeg: ") + tjGetErrorStr2(handle) + ")");
  }
  if (width <= 0 || height <= 0) return Failed("JPEG header gives an empty image");
  return JpegInfo{width, height};
}

int ScaledDimension(int dimension, int scale_down) {
  return TJSCALED(dimension, (tjscalingfactor{1, scale_down}));
}

Status DecodeJpeg(const uint8_t* data, size_t size, const JpegInfo& info, const JpegDecodeOptions& options,
                  uint8_t* out) {
  const TurboDecompressor decompressor;
  PIPETUNE_ASSIGN_OR_RETURN(tjhandle handle, decompressor.Get());
  int flags = 0;
  if (options.fast_dct) flags |= TJFLAG_FASTDCT;
  if (options.fast_upsample) flags |= TJFLAG_FASTUPSAMPLE;
  if (options.strict) flags |= TJFLAG_STOPONWARNING;
  const int width = ScaledDimension(info.width, options.scale_down);
  const int height = ScaledDimension(info.height, options.scale_down);
  if (tjDecompress2(handle, Input(data), static_cast<unsigned long>(size), out, width, /*pitch=*/0, height,
                    TJPF_RGB, flags) == 0) {
    return Status::Ok();
  }
  const char* message = tjGetErrorStr2(handle);
  // A warning still produced a whole image (libjpeg fills what it could not
  // read with grey); only truncation is treated as a failure by default.
  if (tjGetErrorCode(handle) == TJERR_WARNING && !options.strict &&
      std::strstr(message, "Premature end") == nullptr) {
    return Status::Ok();
  }
  return Failed(std::string("corrupt JPEG (libjpeg: ") + message + ")");
}

}  // namespace pipetune::runtime::image

#include "image_jpeg.h"

#include <turbojpeg.h>

#include <cstring>

namespace pipetune::runtime::image {
namespace {

// One decompressor per thread, created on first use and destroyed when the
// thread exits. TurboJPEG handles keep error state and libjpeg structures, so
// two threads must never share one; per-thread handles also mean no lock on
// the hot path.
class ThreadDecoder {
 public:
  ~ThreadDecoder() {
    if (handle_ != nullptr) tjDestroy(handle_);
  }
  tjhandle Get() {
    if (handle_ == nullptr) handle_ = tjInitDecompress();
    return handle_;
  }
  // After a failed call libjpeg's state machine is left mid-way (TurboJPEG
  // 2.1 does not always abort it), which breaks the next header read; a new
  // handle is the reliable reset, and failures are rare.
  void Reset() {
    if (handle_ != nullptr) tjDestroy(handle_);
    handle_ = nullptr;
  }

 private:
  tjhandle handle_ = nullptr;
};

ThreadDecoder& ThisThreadsDecoder() {
  thread_local ThreadDecoder decoder;
  return decoder;
}

StatusOr<tjhandle> Decoder() {
  tjhandle handle = ThisThreadsDecoder().Get();
  if (handle == nullptr)
    return Failed(std::string("cannot create a TurboJPEG decoder: ") + tjGetErrorStr2(nullptr));
  return handle;
}

// TurboJPEG takes a non-const pointer in its 2.x API but does not write.
unsigned char* Input(const uint8_t* data) { return const_cast<unsigned char*>(data); }

}  // namespace

StatusOr<JpegInfo> ReadJpegInfo(const uint8_t* data, size_t size) {
  PIPETUNE_ASSIGN_OR_RETURN(tjhandle handle, Decoder());
  if (size == 0) return Failed("not a JPEG: the data is empty");
  int width = 0, height = 0, subsampling = 0, colorspace = 0;
  if (tjDecompressHeader3(handle, Input(data), static_cast<unsigned long>(size), &width, &height,
                          &subsampling, &colorspace) != 0) {
    Status error = Failed(std::string("not a JPEG (libjpeg: ") + tjGetErrorStr2(handle) + ")");
    ThisThreadsDecoder().Reset();
    return error;
  }
  if (width <= 0 || height <= 0) return Failed("JPEG header gives an empty image");
  return JpegInfo{width, height};
}

int ScaledDimension(int dimension, int scale_down) {
  return TJSCALED(dimension, (tjscalingfactor{1, scale_down}));
}

Status DecodeJpeg(const uint8_t* data, size_t size, const JpegInfo& info, const JpegDecodeOptions& options,
                  uint8_t* out) {
  PIPETUNE_ASSIGN_OR_RETURN(tjhandle handle, Decoder());
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
  Status error = Failed(std::string("corrupt JPEG (libjpeg: ") + message + ")");
  ThisThreadsDecoder().Reset();
  return error;
}

}  // namespace pipetune::runtime::image

// JPEG files for tests that read them from disk (the decode probe, a traced
// image pipeline): 4:2:0, quality 95, pixels from a function. Header-only, so
// the runtime's and the workflow's tests share it; link TurboJPEG.
#pragma once

#include <gtest/gtest.h>
#include <turbojpeg.h>

#include <cstdint>
#include <fstream>
#include <string>
#include <vector>

namespace pipetune::jpeg_files {

// Writes `path` and returns it; pixel(x, y, channel) gives each byte.
// `flags`: TurboJPEG's (TJFLAG_PROGRESSIVE for a progressive file, whose
// Huffman tables are optimised for its data).
template <typename PixelFn>
std::string WriteJpegFile(const std::string& path, int width, int height, PixelFn pixel, int flags = 0) {
  std::vector<uint8_t> rgb(static_cast<size_t>(width) * height * 3);
  for (int y = 0; y < height; ++y) {
    for (int x = 0; x < width; ++x) {
      for (int c = 0; c < 3; ++c) rgb[(static_cast<size_t>(y) * width + x) * 3 + c] = pixel(x, y, c);
    }
  }
  tjhandle encoder = tjInitCompress();
  unsigned char* jpeg = nullptr;
  unsigned long size = 0;
  EXPECT_EQ(tjCompress2(encoder, rgb.data(), width, 0, height, TJPF_RGB, &jpeg, &size, TJSAMP_420, 95, flags),
            0);
  std::ofstream(path, std::ios::binary)
      .write(reinterpret_cast<const char*>(jpeg), static_cast<std::streamsize>(size));
  tjFree(jpeg);
  tjDestroy(encoder);
  return path;
}

// Fine detail: every byte from a small linear congruential generator.
inline auto NoisePixels(uint32_t seed) {
  return [state = seed](int, int, int) mutable {
    state = state * 1664525u + 1013904223u;
    return static_cast<uint8_t>(state >> 24);
  };
}

}  // namespace pipetune::jpeg_files

// How a JPEG decode's CPU splits on this host, for pricing a decode-and-crop
// fusion before it runs (models/decode_crop.h): entropy (Huffman) decoding,
// which a cropped decode still does for every row down to the crop's last,
// against the pixel work (IDCT, chroma upsampling, colour conversion), which
// it does only for the crop. The split depends on the files (their bits per
// pixel) and on the CPU (how fast its vector units do the pixel work): 0.6
// and 0.79 of the image example's decode on two x86-64 machines.
//
// Cost model: each file is read once and decoded 2 x kJpegProbeRounds times
// on the calling thread (about 1.5 ms of CPU per file and round for a
// 0.2-megapixel, 110 KB JPEG); times are the thread's CPU clock, so other
// load on the host does not bias them. Threading: any thread; nothing is
// shared.
#pragma once

#include <string>
#include <vector>

#include "pipetune/base/status.h"
#include "pipetune/models/profile.h"

namespace pipetune::runtime {

inline constexpr int kJpegProbeRounds = 3;

struct JpegProbeOptions {
  bool fast_dct = false;  // as jpeg_decode's args of the same names
  bool fast_upsample = false;
  // Files after the first two are measured only while the probe has spent
  // less CPU than this: large images (a 24-megapixel photo decodes in about
  // 100 ms) keep `tune` and `report` quick.
  double max_cpu_seconds = 0.5;
};

// For each file: the CPU of a whole decode, and of a decode of its last row
// alone (every row above entropy-decoded and skipped, one iMCU column
// transformed), the least of kJpegProbeRounds each; the share is the sum of
// the second over the sum of the first, in [0, 1]. `files` counts the files
// decoded: all, or as many as options.max_cpu_seconds allowed. InvalidInput
// naming the file for one that cannot be read or is not a JPEG libjpeg
// decodes; InvalidInput for an empty list.
StatusOr<models::JpegEntropyShare> MeasureJpegEntropyShare(const std::vector<std::string>& files,
                                                           const JpegProbeOptions& options = {});

}  // namespace pipetune::runtime

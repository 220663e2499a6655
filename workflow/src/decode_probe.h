// What only the host can tell the model before a graph change runs: for a
// config that decodes JPEGs and then crops them (models/decode_crop.h), how
// a decode's CPU splits between entropy decoding and the pixel work on this
// CPU and these files (runtime/jpeg_probe.h). `tune` and `report` both ask
// it, so the plan's fusion and the report's sentence about it agree.
#pragma once

#include <optional>
#include <string>

#include "pipetune/models/config.h"
#include "pipetune/models/profile.h"

namespace pipetune::workflow {

// At most this many of the pipeline's files are decoded (evenly spaced over
// its sorted list): about 0.1 s of CPU for the image example's, and no more
// than about half a second for large images (runtime::JpegProbeOptions).
inline constexpr size_t kDecodeProbeFiles = 16;

// The split measured on files of the list_files stage that feeds the
// config's decode-and-crop pair, its pattern resolved as `pipetune run`
// resolves it (against the directory of `config_path`, the file the traced
// config was read from; the working directory when empty). nullopt when the
// config has no such pair or the files cannot be listed or decoded (a trace
// read on another machine): the model then assumes models::kEntropyShare,
// and says so.
std::optional<models::JpegEntropyShare> MeasureDecodeCropHost(const models::PipelineConfig& config,
                                                              const std::string& config_path);

}  // namespace pipetune::workflow

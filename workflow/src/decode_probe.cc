// decode_probe.h: the host's JPEG decode split for a decode-and-crop pair.
#include "decode_probe.h"

#include <algorithm>
#include <vector>

#include "pipetune/models/decode_crop.h"
#include "pipetune/runtime/file_listing.h"
#include "pipetune/runtime/jpeg_probe.h"
#include "pipetune/workflow/run.h"

namespace pipetune::workflow {
namespace {

// The list_files stage nearest upstream of `decode`, or null.
const models::StageConfig* SourceOf(const models::PipelineConfig& config, size_t decode) {
  for (size_t i = decode; i-- > 0;) {
    if (config.stages[i].op == models::Op::kListFiles) return &config.stages[i];
  }
  return nullptr;
}

bool BoolArg(const models::StageConfig& stage, const char* key) {
  return stage.args.is_object() && stage.args.contains(key) && stage.args[key].is_boolean() &&
         stage.args[key].get<bool>();
}

}  // namespace

std::optional<models::JpegEntropyShare> MeasureDecodeCropHost(const models::PipelineConfig& config,
                                                              const std::string& config_path) {
  std::optional<models::DecodeCropPair> pair = models::FindDecodeCropPair(config);
  if (!pair) return std::nullopt;
  const models::StageConfig* source = SourceOf(config, pair->decode);
  if (source == nullptr) return std::nullopt;
  // The files the run read, as the source stage lists them (a glob or an
  // ImageFolder), relative to the config file's directory.
  StatusOr<runtime::ListedFiles> listed =
      runtime::ListSourceFiles(*source, config_path.empty() ? std::string() : DirectoryOf(config_path));
  if (!listed.ok()) return std::nullopt;
  const std::vector<std::string>& all = listed->paths;
  if (all.empty()) return std::nullopt;
  std::vector<std::string> files;
  const size_t count = std::min(all.size(), kDecodeProbeFiles);
  for (size_t i = 0; i < count; ++i) files.push_back(all[i * all.size() / count]);
  const models::StageConfig& decode = config.stages[pair->decode];
  runtime::JpegProbeOptions options;
  options.fast_dct = BoolArg(decode, "fast_dct");
  options.fast_upsample = BoolArg(decode, "fast_upsample");
  StatusOr<models::JpegEntropyShare> share = runtime::MeasureJpegEntropyShare(files, options);
  if (!share.ok()) return std::nullopt;
  return *share;
}

}  // namespace pipetune::workflow

// decode_probe.h: the host's JPEG decode split for a decode-and-crop pair.
#include "decode_probe.h"

#include <glob.h>
#include <sys/stat.h>

#include <algorithm>
#include <filesystem>
#include <vector>

#include "pipetune/models/decode_crop.h"
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

// Regular files matching `pattern`, sorted (as list_files lists them).
std::vector<std::string> Glob(const std::string& pattern) {
  std::vector<std::string> paths;
  glob_t matches{};
  if (::glob(pattern.c_str(), 0, nullptr, &matches) == 0) {
    for (size_t i = 0; i < matches.gl_pathc; ++i) {
      struct stat info {};
      if (::stat(matches.gl_pathv[i], &info) == 0 && S_ISREG(info.st_mode))
        paths.emplace_back(matches.gl_pathv[i]);
    }
  }
  globfree(&matches);
  std::sort(paths.begin(), paths.end());
  return paths;
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
  if (source == nullptr || !source->args.is_object() || !source->args.contains("pattern") ||
      !source->args["pattern"].is_string()) {
    return std::nullopt;
  }
  std::string pattern = source->args["pattern"].get<std::string>();
  if (!pattern.empty() && pattern.front() != '/' && !config_path.empty()) {
    pattern = (std::filesystem::path(DirectoryOf(config_path)) / pattern).string();
  }
  const std::vector<std::string> all = Glob(pattern);
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

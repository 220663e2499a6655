// The files a `list_files` stage lists, in the order it lists them: what the
// source stage reads (runtime/src/sources.cc) and what a host probe samples
// from the same files (workflow's decode probe), from one function, so the
// two cannot list different files.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "pipetune/base/status.h"
#include "pipetune/models/config.h"

namespace pipetune::runtime {

struct ListedFiles {
  std::vector<std::string> paths;
  std::vector<int64_t> labels;  // one per path for `image_folder`; empty for a glob
};

// `args.pattern`: the regular files matching the glob, sorted bytewise.
// `args.image_folder` (with `extensions`): torchvision's DatasetFolder
// listing, each file with its class index. A relative pattern or folder
// resolves against `base_dir` (empty: as given). Errors name the stage and
// key: nothing matches, a folder without classes, a missing pattern.
StatusOr<ListedFiles> ListSourceFiles(const models::StageConfig& stage, const std::string& base_dir);

}  // namespace pipetune::runtime

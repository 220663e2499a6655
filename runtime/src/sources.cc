// The sources: `range` (synthetic elements) and `list_files` (paths matching
// a glob, or an ImageFolder layout's files with their class labels). A source
// answers each pass request by producing the whole pass (or until the pass is
// cancelled) and then its end-of-pass marker. With BuildOptions' shard it
// produces only its shard of each pass's order.
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <glob.h>
#include <sys/stat.h>

#include <algorithm>
#include <cctype>
#include <cstring>
#include <filesystem>
#include <numeric>
#include <optional>

#include "pipetune/runtime/file_listing.h"
#include "stages.h"

namespace pipetune::runtime {

namespace {

// `path` against `base_dir` when it is relative (and a base is given).
std::string Resolve(const std::string& base_dir, const std::string& path) {
  if (path.empty() || path.front() == '/' || base_dir.empty()) return path;
  return (std::filesystem::path(base_dir) / path).string();
}

}  // namespace

std::string ResolvePath(const RunState& run, const std::string& path) {
  return Resolve(run.options().base_dir, path);
}

namespace {

class SourceStage : public PassServingStage {
 public:
  using PassServingStage::PassServingStage;

  void Cancel() override { channel_.Cancel(); }

 protected:
  // Emits the elements of one pass; false when the pipeline stops.
  virtual bool Produce(StageWorker& worker, const RequestChannel::Request& request) = 0;
  bool ServePass(StageWorker& worker, const RequestChannel::Request& request) override {
    return Produce(worker, request);
  }

  bool Continue(const RequestChannel::Request& request) const {
    return !channel_.Cancelled(request) && !run_->stopping();
  }
};

// Positions shard_index, shard_index + shard_count, ... of a pass.
struct Shard {
  uint64_t first = 0;
  uint64_t step = 1;
};

Shard ShardOf(const RunState& run) {
  return {run.options().shard_index, std::max<uint64_t>(run.options().shard_count, 1)};
}

// How many of `total` positions a shard gets.
uint64_t ShardSize(const Shard& shard, uint64_t total) {
  return shard.first >= total ? 0 : (total - shard.first + shard.step - 1) / shard.step;
}

class RangeStage : public SourceStage {
 public:
  RangeStage(const models::StageConfig& config, RunState* run, std::optional<uint64_t> count, uint64_t bytes)
      : SourceStage(config, run), count_(count), bytes_(bytes) {
    if (count_) tracer::SetEpochElements(trace_id_, ShardSize(ShardOf(*run_), *count_));
  }

  std::optional<uint64_t> ElementsPerPass() const override {
    if (!count_) return std::nullopt;
    return ShardSize(ShardOf(*run_), *count_);
  }

 private:
  bool Produce(StageWorker& worker, const RequestChannel::Request& request) override {
    const Shard shard = ShardOf(*run_);
    for (uint64_t id = shard.first; !count_ || id < *count_; id += shard.step) {
      if (!Continue(request)) break;
      uint64_t begin = worker.now_ns;
      Element element;
      element.id = id;
      element.epoch = request.epoch;
      if (bytes_ > 0) {
        // A payload of its own per element, as a real source would read, with
        // the id in its first bytes so that it differs between elements.
        auto data = std::make_shared<Bytes>(bytes_);
        std::memcpy(data->data(), &id, std::min<uint64_t>(sizeof(id), bytes_));
        element.dtype = DType::kBytes;
        element.data = std::move(data);
      }
      worker.WorkDone(begin, id);
      if (!worker.Emit(std::move(element))) return false;
    }
    return true;
  }

  const std::optional<uint64_t> count_;
  const uint64_t bytes_;
};

class ListFilesStage : public SourceStage {
 public:
  // `labels`: one per path, or empty (a glob's files have none).
  ListFilesStage(const models::StageConfig& config, RunState* run, std::vector<std::string> paths,
                 std::vector<int64_t> labels, std::optional<int64_t> shuffle_seed)
      : SourceStage(config, run),
        paths_(std::move(paths)),
        labels_(std::move(labels)),
        shuffle_seed_(shuffle_seed) {
    // The listing is fixed for the run: every pass is these files, so the
    // trace can say an epoch's size although a repeat keeps this source from
    // ever running dry (what a cache after it would hold).
    tracer::SetEpochElements(trace_id_, ShardSize(ShardOf(*run_), paths_.size()));
  }

  std::optional<uint64_t> ElementsPerPass() const override {
    return ShardSize(ShardOf(*run_), paths_.size());
  }

 private:
  bool Produce(StageWorker& worker, const RequestChannel::Request& request) override {
    std::vector<uint64_t> order(paths_.size());
    std::iota(order.begin(), order.end(), uint64_t{0});
    if (shuffle_seed_) {
      // Fisher-Yates on our own generator: the same order for the same seed
      // and epoch on every platform (std::shuffle's is unspecified). Every
      // shard draws the same order, so the shards of an epoch are disjoint.
      uint64_t seed = static_cast<uint64_t>(*shuffle_seed_) + run_->options().seed;
      uint64_t state = Mix64(seed) ^ Mix64(request.epoch + 1);
      for (size_t i = order.size(); i > 1; --i) {
        state = Mix64(state);
        std::swap(order[i - 1], order[state % i]);
      }
    }
    const Shard shard = ShardOf(*run_);
    for (uint64_t position = shard.first; position < order.size(); position += shard.step) {
      const uint64_t id = order[position];
      if (!Continue(request)) break;
      uint64_t begin = worker.now_ns;
      Element element;
      element.id = id;  // the file's index in the sorted listing, whatever the order
      element.epoch = request.epoch;
      element.path = paths_[id];
      if (!labels_.empty()) element.label = labels_[id];
      worker.WorkDone(begin, id);
      if (!worker.Emit(std::move(element))) return false;
    }
    return true;
  }

  const std::vector<std::string> paths_;
  const std::vector<int64_t> labels_;
  const std::optional<int64_t> shuffle_seed_;
};

// Regular files matching `pattern`, sorted bytewise.
StatusOr<std::vector<std::string>> Glob(const models::StageConfig& config, const std::string& pattern) {
  glob_t matches{};
  int rc = ::glob(pattern.c_str(), GLOB_NOSORT, nullptr, &matches);
  std::vector<std::string> paths;
  if (rc == 0) {
    for (size_t i = 0; i < matches.gl_pathc; ++i) {
      struct stat st {};
      if (::stat(matches.gl_pathv[i], &st) == 0 && S_ISREG(st.st_mode)) {
        paths.emplace_back(matches.gl_pathv[i]);
      }
    }
  }
  globfree(&matches);
  if (rc != 0 && rc != GLOB_NOMATCH) {
    return IoError(models::StageKeyError(config, "args.pattern", fmt::format("cannot list \"{}\"", pattern)));
  }
  if (paths.empty()) {
    return InvalidInput(
        models::StageKeyError(config, "args.pattern", fmt::format("no files match \"{}\"", pattern)));
  }
  std::sort(paths.begin(), paths.end());
  return paths;
}

bool HasExtension(const std::string& name, const std::vector<std::string>& extensions) {
  std::string lower = name;
  std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char c) { return std::tolower(c); });
  for (const std::string& extension : extensions) {
    if (lower.size() >= extension.size() &&
        lower.compare(lower.size() - extension.size(), std::string::npos, extension) == 0) {
      return true;
    }
  }
  return false;
}

// torchvision's DatasetFolder.make_dataset: the classes are ROOT's
// subdirectories (symbolic links followed) sorted by name, a class's index
// is its label; a class's files are those of os.walk(followlinks=True)
// sorted by (directory, name) whose lower-cased name ends in one of
// `extensions`. A class without such files is an error, as torchvision's.
StatusOr<ListedFiles> ListImageFolder(const models::StageConfig& config, const std::string& root,
                                      const std::vector<std::string>& extensions) {
  namespace fs = std::filesystem;
  auto error = [&](const std::string& what) {
    return InvalidInput(models::StageKeyError(config, "args.image_folder", what));
  };
  std::error_code ec;
  std::vector<std::string> classes;
  for (fs::directory_iterator it(root, ec), end; !ec && it != end; it.increment(ec)) {
    if (it->is_directory(ec)) classes.push_back(it->path().filename().string());
  }
  if (ec) return error(fmt::format("cannot list \"{}\": {}", root, ec.message()));
  if (classes.empty())
    return error(fmt::format("no class folders in \"{}\" (expected ROOT/<class>/<file>)", root));
  std::sort(classes.begin(), classes.end());
  ListedFiles out;
  for (size_t label = 0; label < classes.size(); ++label) {
    std::vector<std::pair<std::string, std::string>> files;  // (directory, name): os.walk's order once sorted
    const fs::path dir = fs::path(root) / classes[label];
    for (fs::recursive_directory_iterator it(dir, fs::directory_options::follow_directory_symlink, ec), end;
         !ec && it != end; it.increment(ec)) {
      if (it->is_directory(ec)) continue;
      std::string name = it->path().filename().string();
      if (HasExtension(name, extensions))
        files.emplace_back(it->path().parent_path().string(), std::move(name));
    }
    if (ec) return error(fmt::format("cannot list \"{}\": {}", dir.string(), ec.message()));
    if (files.empty()) {
      return error(fmt::format("class folder \"{}\" has no file ending in {}", classes[label],
                               fmt::join(extensions, ", ")));
    }
    std::sort(files.begin(), files.end());
    for (auto& [directory, name] : files) {
      out.paths.push_back(directory + "/" + name);
      out.labels.push_back(static_cast<int64_t>(label));
    }
  }
  return out;
}

}  // namespace

StatusOr<ListedFiles> ListSourceFiles(const models::StageConfig& config, const std::string& base_dir) {
  PIPETUNE_ASSIGN_OR_RETURN(auto folder, models::ArgString(config, "image_folder"));
  if (folder) {
    PIPETUNE_ASSIGN_OR_RETURN(auto extensions, models::ArgExtensions(config));
    return ListImageFolder(config, Resolve(base_dir, *folder), extensions);
  }
  PIPETUNE_ASSIGN_OR_RETURN(auto pattern, models::ArgString(config, "pattern"));
  if (!pattern || pattern->empty()) {
    return InvalidInput(models::StageKeyError(config, "args.pattern", "missing"));
  }
  PIPETUNE_ASSIGN_OR_RETURN(std::vector<std::string> paths, Glob(config, Resolve(base_dir, *pattern)));
  return ListedFiles{std::move(paths), {}};
}

StatusOr<std::unique_ptr<Stage>> MakeSourceStage(const models::StageConfig& config, RunState* run) {
  if (config.op == models::Op::kRange) {
    PIPETUNE_ASSIGN_OR_RETURN(auto count, models::ArgInt(config, "count", 0));
    PIPETUNE_ASSIGN_OR_RETURN(auto bytes, models::ArgSize(config, "bytes"));
    std::optional<uint64_t> n;
    if (count) n = static_cast<uint64_t>(*count);
    return std::unique_ptr<Stage>(new RangeStage(config, run, n, bytes.value_or(0)));
  }
  PIPETUNE_ASSIGN_OR_RETURN(auto seed, models::ArgInt(config, "shuffle_seed", 0));
  PIPETUNE_ASSIGN_OR_RETURN(ListedFiles files, ListSourceFiles(config, run->options().base_dir));
  return std::unique_ptr<Stage>(
      new ListFilesStage(config, run, std::move(files.paths), std::move(files.labels), seed));
}

}  // namespace pipetune::runtime

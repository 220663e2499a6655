// The sources: `range` (synthetic elements) and `list_files` (paths matching
// a glob). A source answers each pass request by producing the whole pass
// (or until the pass is cancelled) and then its end-of-pass marker.
#include <fmt/format.h>
#include <glob.h>
#include <sys/stat.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <numeric>
#include <optional>

#include "stages.h"

namespace pipetune::runtime {

std::string ResolvePath(const RunState& run, const std::string& path) {
  const std::string& base = run.options().base_dir;
  if (path.empty() || path.front() == '/' || base.empty()) return path;
  return (std::filesystem::path(base) / path).string();
}

namespace {

class SourceStage : public Stage {
 public:
  using Stage::Stage;

  void RequestPass(uint32_t epoch) override { channel_.Post(epoch); }
  void Cancel() override { channel_.Cancel(); }
  void Shutdown() override { channel_.Shutdown(); }

  void RunWorker(int index) override {
    StageWorker worker(*this, index);
    RequestChannel::Request request;
    while (channel_.Wait(*run_, &request)) {
      worker.now_ns = tracer::NowNs();
      if (!Produce(worker, request)) return;
      if (!worker.EmitEndOfPass()) return;
    }
  }

 protected:
  // Emits the elements of one pass; false when the pipeline stops.
  virtual bool Produce(StageWorker& worker, const RequestChannel::Request& request) = 0;

  bool Continue(const RequestChannel::Request& request) const {
    return !channel_.Cancelled(request) && !run_->stopping();
  }

  RequestChannel channel_;
};

class RangeStage : public SourceStage {
 public:
  RangeStage(const models::StageConfig& config, RunState* run, std::optional<uint64_t> count, uint64_t bytes)
      : SourceStage(config, run), count_(count), bytes_(bytes) {
    if (count_) tracer::SetEpochElements(trace_id_, *count_);
  }

 private:
  bool Produce(StageWorker& worker, const RequestChannel::Request& request) override {
    for (uint64_t id = 0; !count_ || id < *count_; ++id) {
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
  ListFilesStage(const models::StageConfig& config, RunState* run, std::vector<std::string> paths,
                 std::optional<int64_t> shuffle_seed)
      : SourceStage(config, run), paths_(std::move(paths)), shuffle_seed_(shuffle_seed) {
    // The listing is fixed for the run: every pass is these files, so the
    // trace can say an epoch's size although a repeat keeps this source from
    // ever running dry (what a cache after it would hold).
    tracer::SetEpochElements(trace_id_, paths_.size());
  }

 private:
  bool Produce(StageWorker& worker, const RequestChannel::Request& request) override {
    std::vector<uint64_t> order(paths_.size());
    std::iota(order.begin(), order.end(), uint64_t{0});
    if (shuffle_seed_) {
      // Fisher-Yates on our own generator: the same order for the same seed
      // and epoch on every platform (std::shuffle's is unspecified).
      uint64_t state = Mix64(static_cast<uint64_t>(*shuffle_seed_)) ^ Mix64(request.epoch + 1);
      for (size_t i = order.size(); i > 1; --i) {
        state = Mix64(state);
        std::swap(order[i - 1], order[state % i]);
      }
    }
    for (uint64_t id : order) {
      if (!Continue(request)) break;
      uint64_t begin = worker.now_ns;
      Element element;
      element.id = id;  // the file's index in the sorted listing, whatever the order
      element.epoch = request.epoch;
      element.path = paths_[id];
      worker.WorkDone(begin, id);
      if (!worker.Emit(std::move(element))) return false;
    }
    return true;
  }

  const std::vector<std::string> paths_;
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

}  // namespace

StatusOr<std::unique_ptr<Stage>> MakeSourceStage(const models::StageConfig& config, RunState* run) {
  if (config.op == models::Op::kRange) {
    PIPETUNE_ASSIGN_OR_RETURN(auto count, models::ArgInt(config, "count", 0));
    PIPETUNE_ASSIGN_OR_RETURN(auto bytes, models::ArgSize(config, "bytes"));
    std::optional<uint64_t> n;
    if (count) n = static_cast<uint64_t>(*count);
    return std::unique_ptr<Stage>(new RangeStage(config, run, n, bytes.value_or(0)));
  }
  PIPETUNE_ASSIGN_OR_RETURN(auto pattern, models::ArgString(config, "pattern"));
  if (!pattern || pattern->empty()) {
    return InvalidInput(models::StageKeyError(config, "args.pattern", "missing"));
  }
  PIPETUNE_ASSIGN_OR_RETURN(auto seed, models::ArgInt(config, "shuffle_seed", 0));
  PIPETUNE_ASSIGN_OR_RETURN(auto paths, Glob(config, ResolvePath(*run, *pattern)));
  return std::unique_ptr<Stage>(new ListFilesStage(config, run, std::move(paths), seed));
}

}  // namespace pipetune::runtime

// `cache`: the first complete pass through it is stored; every later pass
// request is answered from the store without asking the stages before it.
//
// location "memory" (the default) keeps the elements (payloads are shared,
// not copied) and counts their bytes as cache memory. Any other location is a
// directory: the pass is written to DIR/STAGE.ptcache (disk_cache.h), and a
// later run of the same pipeline finds the complete file and replays it from
// its first pass on. A pass that is cancelled (a `take` after the cache) or
// stopped leaves the cache incomplete: the memory is released, the temporary
// file removed, and the next pass fills it again.
#include <fmt/format.h>

#include <filesystem>

#include "disk_cache.h"
#include "stages.h"

namespace pipetune::runtime {
namespace {

class CacheStage : public Stage {
 public:
  // `disk_path` empty: a memory cache.
  CacheStage(const models::StageConfig& config, RunState* run, std::string disk_path, uint64_t fingerprint)
      : Stage(config, run), disk_path_(std::move(disk_path)), fingerprint_(fingerprint) {
    if (!disk_path_.empty()) complete_ = DiskCacheReader::Open(disk_path_, fingerprint_).ok();
  }

  ~CacheStage() override { run_->cache().Add(-static_cast<int64_t>(memory_bytes_)); }

  void RequestPass(uint32_t epoch) override { channel_.Post(epoch); }
  void Cancel() override {
    std::lock_guard<std::mutex> lock(mu_);  // see RepeatStage::Cancel
    channel_.Cancel();
    upstream_->Cancel();
  }
  void Shutdown() override { channel_.Shutdown(); }
  uint64_t CacheBytes() const override {
    return disk_path_.empty() ? memory_bytes_.load(std::memory_order_relaxed)
                              : disk_bytes_.load(std::memory_order_relaxed);
  }

  void RunWorker(int index) override {
    StageWorker worker(*this, index);
    RequestChannel::Request request;
    while (channel_.Wait(*run_, &request)) {
      worker.now_ns = tracer::NowNs();
      bool ok = true;
      if (!complete_) {
        ok = Fill(worker, request);
      } else if (disk_path_.empty()) {
        ok = ReplayMemory(worker, request);
      } else {
        ok = ReplayDisk(worker, request);
      }
      if (!ok || !worker.EmitEndOfPass()) return;
    }
  }

 private:
  bool Continue(const RequestChannel::Request& request) const {
    return !channel_.Cancelled(request) && !run_->stopping();
  }

  void AddMemory(int64_t delta) {
    memory_bytes_.fetch_add(static_cast<uint64_t>(delta), std::memory_order_relaxed);
    run_->cache().Add(delta);
  }
  void AddDisk(uint64_t bytes) {
    disk_bytes_.fetch_add(bytes, std::memory_order_relaxed);
    run_->disk_cache_bytes().fetch_add(bytes, std::memory_order_relaxed);
  }

  // Passes the upstream pass on while storing it.
  bool Fill(StageWorker& worker, const RequestChannel::Request& request) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (channel_.Cancelled(request)) return true;
      upstream_->RequestPass(request.epoch);
    }
    std::unique_ptr<DiskCacheWriter> writer;
    if (!disk_path_.empty()) {
      auto created = DiskCacheWriter::Create(disk_path_, fingerprint_);
      if (!created.ok()) return FailWith(created.status());
      writer = std::move(created).value();
    }
    stored_.clear();
    AddMemory(-static_cast<int64_t>(memory_bytes_.load(std::memory_order_relaxed)));
    Item item;
    while (true) {
      StageWorker::Input input = worker.Next(&item);
      if (input == StageWorker::Input::kClosed) return false;
      if (input == StageWorker::Input::kEndOfPass) break;
      uint64_t begin = worker.now_ns;
      Element& element = item.element;
      if (writer) {
        uint64_t before = writer->bytes();
        Status written = writer->Write(element);
        if (!written.ok()) return FailWith(written);
        AddDisk(writer->bytes() - before);
      } else {
        stored_.push_back(element);
        AddMemory(static_cast<int64_t>(element.ByteSize()));
      }
      worker.WorkDone(begin, element.id);
      if (!worker.Emit(std::move(element))) return false;
    }
    if (!Continue(request)) {
      // An incomplete pass is no cache: drop it, fill again next time.
      stored_.clear();
      AddMemory(-static_cast<int64_t>(memory_bytes_.load(std::memory_order_relaxed)));
      return true;  // the writer's destructor removes its temporary file
    }
    if (writer) {
      Status finished = writer->Finish();
      if (!finished.ok()) return FailWith(finished);
    }
    complete_ = true;
    return true;
  }

  bool ReplayMemory(StageWorker& worker, const RequestChannel::Request& request) {
    for (const Element& stored : stored_) {
      if (!Continue(request)) break;
      uint64_t begin = worker.now_ns;
      Element element = stored;
      element.epoch = request.epoch;
      worker.WorkDone(begin, element.id);
      if (!worker.Emit(std::move(element))) return false;
    }
    return true;
  }

  bool ReplayDisk(StageWorker& worker, const RequestChannel::Request& request) {
    auto opened = DiskCacheReader::Open(disk_path_, fingerprint_);
    if (!opened.ok()) return FailWith(opened.status());
    DiskCacheReader& reader = **opened;
    while (Continue(request)) {
      uint64_t begin = worker.now_ns;
      Element element;
      StatusOr<bool> more = reader.Next(&element);
      if (!more.ok()) return FailWith(more.status());
      if (!*more) break;
      element.epoch = request.epoch;
      AddDisk(element.ByteSize());
      worker.WorkDone(begin, element.id);
      if (!worker.Emit(std::move(element))) return false;
    }
    return true;
  }

  bool FailWith(const Status& status) {
    run_->Fail(Status(status.code(), models::StageKeyError(config_, "location", status.message())));
    return false;
  }

  const std::string disk_path_;
  const uint64_t fingerprint_;
  RequestChannel channel_;
  std::mutex mu_;
  bool complete_ = false;  // worker thread only (after construction)
  std::vector<Element> stored_;
  std::atomic<uint64_t> memory_bytes_{0};
  std::atomic<uint64_t> disk_bytes_{0};
};

// A file name from a stage name: anything but [A-Za-z0-9._-] becomes '_'.
std::string CacheFileName(const std::string& stage_name) {
  std::string name = stage_name.empty() ? "cache" : stage_name;
  for (char& c : name) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
              c == '_' || c == '-';
    if (!ok) c = '_';
  }
  return name + ".ptcache";
}

}  // namespace

StatusOr<std::unique_ptr<Stage>> MakeCacheStage(const models::StageConfig& config, RunState* run,
                                                uint64_t fingerprint) {
  models::CacheLocation location = config.location.value_or(models::CacheLocation::Memory());
  std::string disk_path;
  if (!location.in_memory()) {
    std::filesystem::path dir(ResolvePath(*run, location.directory));
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);
    if (ec || !std::filesystem::is_directory(dir)) {
      return InvalidInput(models::StageKeyError(config, "location",
                                                fmt::format("cannot use directory \"{}\": {}", dir.string(),
                                                            ec ? ec.message() : "not a directory")));
    }
    disk_path = (dir / CacheFileName(config.name)).string();
  }
  return std::unique_ptr<Stage>(new CacheStage(config, run, std::move(disk_path), fingerprint));
}

}  // namespace pipetune::runtime

// The trace reader in two steps: the framing (file preamble, chunk headers,
// checksums, deciding where reading must stop) and the decoding of each
// chunk's payload into records for the visitor.
#include "pipetune/tracer/reader.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <memory>
#include <optional>
#include <type_traits>

#include "crc32.h"
#include "format.h"
#include "schema.h"

namespace pipetune::tracer {
namespace {

using internal::ByteReader;
using internal::ChunkType;

// No writer makes a chunk this large (the largest, a GPU chunk of 65536
// records with 512-byte names, is about 36 MB); a claim beyond it is
// corruption, and refusing it keeps a hostile length from allocating.
constexpr uint64_t kMaxChunkBytes = 256u << 20;

// Where the bytes come from: a file read chunk by chunk, or memory.
class Source {
 public:
  virtual ~Source() = default;
  virtual uint64_t size() const = 0;
  // Bytes [offset, offset + n), valid until the next call; nullopt on an I/O
  // error. The caller has checked that the range lies within size().
  virtual std::optional<std::string_view> Read(uint64_t offset, size_t n) = 0;
};

class MemorySource : public Source {
 public:
  explicit MemorySource(std::string_view bytes) : bytes_(bytes) {}
  uint64_t size() const override { return bytes_.size(); }
  std::optional<std::string_view> Read(uint64_t offset, size_t n) override {
    return bytes_.substr(offset, n);
  }

 private:
  std::string_view bytes_;
};

class FileSource : public Source {
 public:
  ~FileSource() override {
    if (fd_ >= 0) ::close(fd_);
  }
  Status Open(const std::string& path) {
    fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd_ < 0) {
      int e = errno;
      std::string why = std::strerror(e);
      return e == ENOENT ? NotFound(path + ": no such file") : IoError(path + ": cannot open: " + why);
    }
    struct stat st {};
    if (::fstat(fd_, &st) != 0) return IoError(path + ": cannot stat: " + std::strerror(errno));
    if (S_ISDIR(st.st_mode)) return InvalidInput(path + ": is a directory, not a trace");
    // A live trace grows while we read: read what existed when we opened it.
    size_ = static_cast<uint64_t>(st.st_size);
    return Status::Ok();
  }
  uint64_t size() const override { return size_; }
  std::optional<std::string_view> Read(uint64_t offset, size_t n) override {
    buffer_.resize(n);
    size_t done = 0;
    while (done < n) {
      ssize_t got = ::pread(fd_, buffer_.data() + done, n - done, static_cast<off_t>(offset + done));
      if (got < 0 && errno == EINTR) continue;
      if (got <= 0) return std::nullopt;
      done += static_cast<size_t>(got);
    }
    return std::string_view(buffer_);
  }

 private:
  int fd_ = -1;
  uint64_t size_ = 0;
  std::string buffer_;
};

std::string At(const std::string& name, uint64_t offset) {
  return name + ": byte " + std::to_string(offset) + ": ";
}

// The header body; false when a field is missing.
bool DecodeHeaderBody(std::string_view body, TraceHeader* h) {
  ByteReader r(body);
  internal::ReadRecord(r, *h);
  return !r.failed();  // bytes after the known fields: a newer writer's, ignored
}

// Reads and checks the preamble and header; on success *end is the offset of
// the first chunk.
StatusOr<TraceHeader> ReadHeader(Source& src, const std::string& name, uint64_t* end) {
  const uint64_t size = src.size();
  size_t magic_bytes = static_cast<size_t>(std::min<uint64_t>(size, sizeof(internal::kMagic)));
  std::optional<std::string_view> magic = src.Read(0, magic_bytes);
  if (!magic) return IoError(name + ": cannot read");
  if (magic->compare(0, magic_bytes, internal::kMagic, magic_bytes) != 0 || size == 0) {
    return InvalidInput(At(name, 0) + "not a pipetune trace (no trace magic at the start of the file)");
  }
  if (size < internal::kFilePreambleBytes) {
    return InvalidInput(At(name, size) + "unreadable header: the file ends inside the header (" +
                        std::to_string(size) + " bytes)");
  }
  std::optional<std::string_view> pre = src.Read(0, internal::kFilePreambleBytes);
  if (!pre) return IoError(name + ": cannot read");
  ByteReader r(*pre);
  r.Skip(sizeof(internal::kMagic));
  uint32_t version = r.U32();
  uint32_t body_bytes = r.U32();
  uint32_t body_crc = r.U32();
  if (version > kTraceFormatVersion) {
    return InvalidInput(At(name, 8) + "trace format version " + std::to_string(version) +
                        " is newer than this pipetune reads (" + std::to_string(kTraceFormatVersion) +
                        "); use a newer pipetune");
  }
  if (version == 0) return InvalidInput(At(name, 8) + "unreadable header: format version 0");
  if (body_bytes > size - internal::kFilePreambleBytes) {
    return InvalidInput(At(name, internal::kFilePreambleBytes) + "unreadable header: it claims " +
                        std::to_string(body_bytes) + " bytes but the file ends at byte " +
                        std::to_string(size));
  }
  std::optional<std::string_view> body = src.Read(internal::kFilePreambleBytes, body_bytes);
  if (!body) return IoError(name + ": cannot read");
#ifndef FUZZING_BUILD_MODE_UNSAFE_FOR_PRODUCTION  // see fuzz/CMakeLists.txt
  if (internal::Crc32(0, body->data(), body->size()) != body_crc) {
    return InvalidInput(At(name, internal::kFilePreambleBytes) + "unreadable header: checksum mismatch");
  }
#else
  (void)body_crc;
#endif
  TraceHeader header;
  header.format_version = version;
  if (!DecodeHeaderBody(*body, &header)) {
    return InvalidInput(At(name, internal::kFilePreambleBytes) + "unreadable header: fields are missing");
  }
  *end = internal::kFilePreambleBytes + body_bytes;
  return header;
}

// Reads `count | record_bytes` and checks that the records fit in what is
// left of the payload; false when they do not. Each record is read from its
// own record_bytes, so bytes a newer writer appended are skipped.
template <class T>
bool ReadRecordArray(ByteReader& r, std::vector<T>* out) {
  uint32_t count = r.U32();
  uint32_t record_bytes = r.U32();
  if (r.failed() || record_bytes < internal::kMinRecordBytes<T> ||
      static_cast<uint64_t>(count) * record_bytes > r.remaining()) {
    return false;
  }
  out->clear();
  for (uint32_t i = 0; i < count; ++i) {
    ByteReader f(r.Take(record_bytes));
    T record;
    uint32_t trailing = internal::ReadRecord(f, record);
    if constexpr (std::is_same_v<T, GpuActivity>) {
      std::string_view name = r.Take(trailing);  // the name follows the fixed record
      if (r.failed()) return false;
      record.name = std::string(name);
    }
    out->push_back(std::move(record));
  }
  return true;
}

// One record filling a chunk's payload; false when fields are missing.
template <class T>
bool ReadSingle(std::string_view payload, T* record) {
  ByteReader r(payload);
  internal::ReadRecord(r, *record);
  return !r.failed();
}

// Decodes one chunk's payload and hands its records to the visitor. Records
// are validated before any is delivered, so a malformed chunk delivers
// nothing. Returns false when the payload is malformed. `scratch` holds the
// records between validation and delivery.
struct Scratch {
  std::vector<StageDef> stages;
  std::vector<WorkerDef> workers;
  std::vector<StageSnapshot> snapshots;
  std::vector<SpanRecord> spans;
  std::vector<ConsumerStepRecord> steps;
  std::vector<GpuActivity> gpu;
};

template <class T, class Deliver>
bool DecodeArray(std::string_view payload, std::vector<T>* scratch, Deliver deliver) {
  ByteReader r(payload);
  if (!ReadRecordArray(r, scratch)) return false;
  for (const T& record : *scratch) deliver(record);
  return true;
}

template <class T, class Deliver>
bool DecodeSingle(std::string_view payload, Deliver deliver) {
  T record;
  if (!ReadSingle(payload, &record)) return false;
  deliver(record);
  return true;
}

bool DecodeChunk(ChunkType type, std::string_view payload, TraceVisitor& v, Scratch& scratch, bool* known) {
  *known = true;
  switch (type) {
    case ChunkType::kStages: {
      // Variable-size records: count, then each record's fields.
      ByteReader r(payload);
      uint32_t count = r.U32();
      scratch.stages.clear();
      for (uint32_t i = 0; i < count && !r.failed(); ++i) {
        StageDef d;
        internal::ReadRecord(r, d);
        if (!r.failed()) scratch.stages.push_back(std::move(d));
      }
      if (r.failed()) return false;
      for (const StageDef& d : scratch.stages) v.OnStage(d);
      return true;
    }
    case ChunkType::kWorkers:
      return DecodeArray(payload, &scratch.workers, [&](const WorkerDef& d) { v.OnWorker(d); });
    case ChunkType::kSnapshot: {
      ByteReader r(payload);
      uint64_t time_ns = r.U64();
      if (!ReadRecordArray(r, &scratch.snapshots)) return false;
      for (StageSnapshot& s : scratch.snapshots) {
        s.time_ns = time_ns;
        v.OnSnapshot(s);
      }
      return true;
    }
    case ChunkType::kConsumerTotals:
      return DecodeSingle<ConsumerTotals>(payload, [&](const ConsumerTotals& t) { v.OnConsumerTotals(t); });
    case ChunkType::kProcessSample:
      return DecodeSingle<ProcessSample>(payload, [&](const ProcessSample& p) { v.OnProcessSample(p); });
    case ChunkType::kDrops:
      return DecodeSingle<DropCounts>(payload, [&](const DropCounts& d) { v.OnDrops(d); });
    case ChunkType::kSpans:
      return DecodeArray(payload, &scratch.spans, [&](const SpanRecord& s) { v.OnSpan(s); });
    case ChunkType::kConsumerSteps:
      return DecodeArray(payload, &scratch.steps, [&](const ConsumerStepRecord& s) { v.OnConsumerStep(s); });
    case ChunkType::kGpuActivity:
      return DecodeArray(payload, &scratch.gpu, [&](const GpuActivity& a) { v.OnGpuActivity(a); });
    case ChunkType::kGpuStatus:
      return DecodeSingle<GpuStatus>(payload, [&](const GpuStatus& s) { v.OnGpuStatus(s); });
    case ChunkType::kPipelineInfo:
      return DecodeSingle<PipelineInfo>(payload, [&](const PipelineInfo& p) { v.OnPipelineInfo(p); });
    case ChunkType::kEnd:
      return DecodeSingle<TraceEnd>(payload, [&](const TraceEnd& e) { v.OnEnd(e); });
  }
  *known = false;  // a chunk type from a newer writer: skipped, not an error
  return true;
}

void FinishReport(ReadReport* report, uint64_t offset, const std::string& reason) {
  report->bytes_read = offset;
  report->bytes_not_read = report->file_bytes - offset;
  if (reason.empty()) return;
  report->stop_reason = reason;
  char percent[32];
  std::snprintf(
      percent, sizeof(percent), "%.1f",
      100.0 * static_cast<double>(report->bytes_not_read) / static_cast<double>(report->file_bytes));
  report->warning = report->path + ": trace truncated at byte " + std::to_string(offset) + ": " +
                    std::to_string(report->bytes_not_read) + " bytes (" + percent +
                    "%) after the last whole chunk were not read (" + reason + ")";
}

// Streams the whole chunks from *offset on through `visitor`, counting them
// in *report and moving *offset past each; *reason says why it stopped
// before the end (a chunk not wholly there, or a bad one), empty otherwise.
Status ReadChunks(Source& src, const std::string& name, TraceVisitor& visitor, uint64_t* offset,
                  ReadReport* report, std::string* reason) {
  Scratch scratch;
  const uint64_t size = src.size();
  while (*offset < size) {
    if (size - *offset < internal::kChunkHeaderBytes) {
      *reason = "the file ends inside a chunk header";
      break;
    }
    std::optional<std::string_view> head = src.Read(*offset, internal::kChunkHeaderBytes);
    if (!head) return IoError(At(name, *offset) + "cannot read");
    ByteReader h(*head);
    uint32_t type = h.U32();
    uint32_t length = h.U32();
    uint32_t crc = h.U32();
    uint64_t available = size - *offset - internal::kChunkHeaderBytes;
    if (length > available) {
      *reason = "the chunk there claims " + std::to_string(length) + " bytes, the file has " +
                std::to_string(available) + " more";
      break;
    }
    if (length > kMaxChunkBytes) {
      *reason = "the chunk there claims " + std::to_string(length) + " bytes, more than any writer makes";
      break;
    }
    uint32_t actual = internal::Crc32(0, head->data(), 8);
    std::optional<std::string_view> payload = src.Read(*offset + internal::kChunkHeaderBytes, length);
    if (!payload) return IoError(At(name, *offset) + "cannot read");
    actual = internal::Crc32(actual, payload->data(), payload->size());
#ifndef FUZZING_BUILD_MODE_UNSAFE_FOR_PRODUCTION  // see fuzz/CMakeLists.txt
    if (actual != crc) {
      *reason = "the chunk there has a bad checksum";
      break;
    }
#else
    (void)crc;
#endif
    bool known = true;
    if (!DecodeChunk(static_cast<ChunkType>(type), *payload, visitor, scratch, &known)) {
      *reason = "the chunk there (type " + std::to_string(type) + ") is malformed";
      break;
    }
    if (static_cast<ChunkType>(type) == ChunkType::kEnd) report->ended_cleanly = true;
    ++(known ? report->chunks_read : report->chunks_skipped);
    *offset += internal::kChunkHeaderBytes + length;
  }
  return Status::Ok();
}

StatusOr<ReadReport> ReadFrom(Source& src, const std::string& name, TraceVisitor& visitor) {
  uint64_t offset = 0;
  PIPETUNE_ASSIGN_OR_RETURN(TraceHeader header, ReadHeader(src, name, &offset));
  ReadReport report;
  report.path = name;
  report.file_bytes = src.size();
  report.header_bytes = offset;
  visitor.OnHeader(header);
  std::string reason;
  PIPETUNE_RETURN_IF_ERROR(ReadChunks(src, name, visitor, &offset, &report, &reason));
  FinishReport(&report, offset, reason);
  return report;
}

// Materialises a trace: LoadTrace's visitor.
class Collector : public TraceVisitor {
 public:
  explicit Collector(Trace* t) : t_(t) {}
  void OnHeader(const TraceHeader& h) override { t_->header = h; }
  void OnPipelineInfo(const PipelineInfo& p) override { t_->header.pipeline = p; }
  void OnStage(const StageDef& d) override { t_->stages.push_back(d); }
  void OnWorker(const WorkerDef& d) override { t_->workers.push_back(d); }
  void OnSnapshot(const StageSnapshot& s) override { t_->snapshots.push_back(s); }
  void OnSpan(const SpanRecord& s) override { t_->spans.push_back(s); }
  void OnConsumerStep(const ConsumerStepRecord& s) override { t_->consumer_steps.push_back(s); }
  void OnConsumerTotals(const ConsumerTotals& c) override { t_->consumer_totals.push_back(c); }
  void OnProcessSample(const ProcessSample& p) override { t_->process_samples.push_back(p); }
  void OnGpuActivity(const GpuActivity& a) override { t_->gpu_activity.push_back(a); }
  void OnGpuStatus(const GpuStatus& s) override {
    t_->has_gpu_status = true;
    t_->gpu_status = s;
  }
  void OnDrops(const DropCounts& d) override { t_->drops = d; }
  void OnEnd(const TraceEnd& e) override {
    t_->has_end = true;
    t_->end = e;
  }

 private:
  Trace* t_;
};

}  // namespace

StatusOr<ReadReport> ReadTrace(const std::string& path, TraceVisitor& visitor) {
  FileSource src;
  PIPETUNE_RETURN_IF_ERROR(src.Open(path));
  return ReadFrom(src, path, visitor);
}

StatusOr<ReadReport> ReadTraceFromMemory(std::string_view bytes, TraceVisitor& visitor,
                                         const std::string& name) {
  MemorySource src(bytes);
  return ReadFrom(src, name, visitor);
}

StatusOr<ReadReport> TraceTail::ReadMore(TraceVisitor& visitor) {
  FileSource src;
  PIPETUNE_RETURN_IF_ERROR(src.Open(path_));
  if (offset_ == 0) {
    PIPETUNE_ASSIGN_OR_RETURN(TraceHeader header, ReadHeader(src, path_, &offset_));
    report_ = ReadReport{};
    report_.path = path_;
    report_.header_bytes = offset_;
    visitor.OnHeader(header);
  }
  report_.file_bytes = src.size();
  report_.stop_reason.clear();
  report_.warning.clear();
  std::string reason;
  PIPETUNE_RETURN_IF_ERROR(ReadChunks(src, path_, visitor, &offset_, &report_, &reason));
  FinishReport(&report_, offset_, reason);
  return report_;
}

StatusOr<TraceHeader> ReadTraceHeader(const std::string& path) {
  FileSource src;
  PIPETUNE_RETURN_IF_ERROR(src.Open(path));
  uint64_t end = 0;
  return ReadHeader(src, path, &end);
}

StatusOr<Trace> LoadTrace(const std::string& path) {
  Trace trace;
  Collector collector(&trace);
  PIPETUNE_ASSIGN_OR_RETURN(trace.report, ReadTrace(path, collector));
  return trace;
}

StatusOr<Trace> LoadTraceFromMemory(std::string_view bytes, const std::string& name) {
  Trace trace;
  Collector collector(&trace);
  PIPETUNE_ASSIGN_OR_RETURN(trace.report, ReadTraceFromMemory(bytes, collector, name));
  return trace;
}

const StageDef* Trace::FindStage(StageId id) const {
  for (const StageDef& d : stages) {
    if (d.id == id) return &d;
  }
  return nullptr;
}

const StageSnapshot* Trace::LastSnapshot(StageId id) const {
  for (auto it = snapshots.rbegin(); it != snapshots.rend(); ++it) {
    if (it->stage == id) return &*it;
  }
  return nullptr;
}

uint64_t Trace::DurationNs() const {
  uint64_t last = has_end ? end.time_ns : 0;
  if (!snapshots.empty()) last = std::max(last, snapshots.back().time_ns);
  if (!consumer_totals.empty()) last = std::max(last, consumer_totals.back().time_ns);
  return last > header.clock.start_ns ? last - header.clock.start_ns : 0;
}

}  // namespace pipetune::tracer

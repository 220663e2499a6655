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

#include "crc32.h"
#include "format.h"

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
  h->pid = r.U32();
  h->snapshot_interval_ms = r.U32();
  h->spans_per_stage_per_second = r.U32();
  h->consumer_steps_per_second = r.U32();
  h->clock.clock_id = r.U32();
  h->clock.resolution_ns = r.U64();
  h->clock.start_ns = r.U64();
  h->clock.start_unix_ns = r.I64();
  h->clock.name = r.Str();
  h->host.cores_online = r.U32();
  h->host.cores_allowed = r.U32();
  h->host.cgroup_version = r.U32();
  h->host.cpu_quota_us = r.I64();
  h->host.cpu_period_us = r.I64();
  h->host.memory_limit_bytes = r.I64();
  h->host.memory_available_bytes = r.I64();
  h->host.memory_total_bytes = r.I64();
  h->host.hostname = r.Str();
  h->tracer_version = r.Str();
  h->pipeline.name = r.Str();
  h->pipeline.config_json = r.Str();
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
// left of the payload; false when they do not.
bool RecordArray(ByteReader& r, uint32_t min_record_bytes, uint32_t* count, uint32_t* record_bytes) {
  *count = r.U32();
  *record_bytes = r.U32();
  return !r.failed() && *record_bytes >= min_record_bytes &&
         static_cast<uint64_t>(*count) * *record_bytes <= r.remaining();
}

// Decodes one chunk's payload and hands its records to the visitor. Records
// are validated before any is delivered, so a malformed chunk delivers
// nothing. Returns false when the payload is malformed. `scratch` holds
// variable-size records between validation and delivery.
struct Scratch {
  std::vector<StageDef> stages;
  std::vector<GpuActivity> gpu;
};

bool DecodeChunk(ChunkType type, std::string_view payload, TraceVisitor& v, Scratch& scratch, bool* known) {
  ByteReader r(payload);
  uint32_t count = 0, rec = 0;
  *known = true;
  switch (type) {
    case ChunkType::kStages: {
      count = r.U32();
      scratch.stages.clear();
      for (uint32_t i = 0; i < count && !r.failed(); ++i) {
        StageDef d;
        d.id = r.U32();
        d.parallelism = r.U32();
        d.name = r.Str();
        d.op = r.Str();
        if (!r.failed()) scratch.stages.push_back(std::move(d));
      }
      if (r.failed()) return false;
      for (const StageDef& d : scratch.stages) v.OnStage(d);
      return true;
    }
    case ChunkType::kWorkers: {
      if (!RecordArray(r, internal::kWorkerRecordBytes, &count, &rec)) return false;
      for (uint32_t i = 0; i < count; ++i) {
        ByteReader f(r.Take(rec));
        WorkerDef d;
        d.worker = f.U32();
        d.stage = f.U32();
        d.os_tid = f.U32();
        f.U32();
        d.attach_ns = f.U64();
        v.OnWorker(d);
      }
      return true;
    }
    case ChunkType::kSnapshot: {
      uint64_t time_ns = r.U64();
      if (!RecordArray(r, internal::kStageSnapshotRecordBytes, &count, &rec)) return false;
      for (uint32_t i = 0; i < count; ++i) {
        ByteReader f(r.Take(rec));
        StageSnapshot s;
        s.time_ns = time_ns;
        s.stage = f.U32();
        s.parallelism = f.U32();
        s.live_workers = f.U32();
        f.U32();
        s.produced = f.U64();
        s.consumed = f.U64();
        s.bytes_produced = f.U64();
        s.cpu_ns = f.U64();
        s.work_ns = f.U64();
        s.wait_input_ns = f.U64();
        s.wait_output_ns = f.U64();
        s.occupancy_elements = f.I64();
        s.occupancy_bytes = f.I64();
        s.spans_recorded = f.U64();
        s.spans_dropped = f.U64();
        v.OnSnapshot(s);
      }
      return true;
    }
    case ChunkType::kConsumerTotals: {
      ConsumerTotals t;
      t.time_ns = r.U64();
      t.steps = r.U64();
      t.wait_ns = r.U64();
      t.step_ns = r.U64();
      t.steps_recorded = r.U64();
      t.steps_dropped = r.U64();
      if (r.failed()) return false;
      v.OnConsumerTotals(t);
      return true;
    }
    case ChunkType::kProcessSample: {
      ProcessSample p;
      p.time_ns = r.U64();
      p.cpu_ns = r.U64();
      p.rss_bytes = r.U64();
      p.read_bytes = r.I64();
      p.read_syscall_bytes = r.I64();
      p.threads = r.U32();
      if (r.failed()) return false;
      v.OnProcessSample(p);
      return true;
    }
    case ChunkType::kDrops: {
      DropCounts d;
      d.time_ns = r.U64();
      d.spans = r.U64();
      d.consumer_steps = r.U64();
      d.gpu_records = r.U64();
      d.gpu_records_at_source = r.U64();
      if (r.failed()) return false;
      v.OnDrops(d);
      return true;
    }
    case ChunkType::kSpans: {
      if (!RecordArray(r, internal::kSpanRecordBytes, &count, &rec)) return false;
      for (uint32_t i = 0; i < count; ++i) {
        ByteReader f(r.Take(rec));
        SpanRecord s;
        s.stage = f.U32();
        s.worker = f.U32();
        s.element_id = f.U64();
        s.begin_ns = f.U64();
        s.end_ns = f.U64();
        v.OnSpan(s);
      }
      return true;
    }
    case ChunkType::kConsumerSteps: {
      if (!RecordArray(r, internal::kConsumerStepRecordBytes, &count, &rec)) return false;
      for (uint32_t i = 0; i < count; ++i) {
        ByteReader f(r.Take(rec));
        ConsumerStepRecord s;
        s.consumer = f.U32();
        f.U32();
        s.end_ns = f.U64();
        s.wait_ns = f.U64();
        s.step_ns = f.U64();
        v.OnConsumerStep(s);
      }
      return true;
    }
    case ChunkType::kGpuActivity: {
      count = r.U32();
      rec = r.U32();
      if (r.failed() || rec < internal::kGpuRecordFixedBytes) return false;
      scratch.gpu.clear();
      for (uint32_t i = 0; i < count && !r.failed(); ++i) {
        ByteReader f(r.Take(rec));
        GpuActivity a;
        a.kind = static_cast<GpuActivityKind>(f.U32());
        a.device = f.U32();
        a.stream = f.U32();
        uint32_t name_bytes = f.U32();
        a.start_ns = f.U64();
        a.end_ns = f.U64();
        a.bytes = f.U64();
        a.correlation_id = f.U64();
        std::string_view name = r.Take(name_bytes);
        if (!r.failed()) {
          a.name = std::string(name);
          scratch.gpu.push_back(std::move(a));
        }
      }
      if (r.failed()) return false;
      for (const GpuActivity& a : scratch.gpu) v.OnGpuActivity(a);
      return true;
    }
    case ChunkType::kPipelineInfo: {
      PipelineInfo info;
      info.name = r.Str();
      info.config_json = r.Str();
      if (!r.failed() && r.remaining() > 0) info.config_path = r.Str();
      if (r.failed()) return false;
      v.OnPipelineInfo(info);
      return true;
    }
    case ChunkType::kEnd: {
      TraceEnd end;
      end.time_ns = r.U64();
      if (r.failed()) return false;
      v.OnEnd(end);
      return true;
    }
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

StatusOr<ReadReport> ReadFrom(Source& src, const std::string& name, TraceVisitor& visitor) {
  uint64_t offset = 0;
  PIPETUNE_ASSIGN_OR_RETURN(TraceHeader header, ReadHeader(src, name, &offset));
  ReadReport report;
  report.path = name;
  report.file_bytes = src.size();
  report.header_bytes = offset;
  visitor.OnHeader(header);

  Scratch scratch;
  const uint64_t size = src.size();
  std::string reason;
  while (offset < size) {
    if (size - offset < internal::kChunkHeaderBytes) {
      reason = "the file ends inside a chunk header";
      break;
    }
    std::optional<std::string_view> head = src.Read(offset, internal::kChunkHeaderBytes);
    if (!head) return IoError(At(name, offset) + "cannot read");
    ByteReader h(*head);
    uint32_t type = h.U32();
    uint32_t length = h.U32();
    uint32_t crc = h.U32();
    uint64_t available = size - offset - internal::kChunkHeaderBytes;
    if (length > available) {
      reason = "the chunk there claims " + std::to_string(length) + " bytes, the file has " +
               std::to_string(available) + " more";
      break;
    }
    if (length > kMaxChunkBytes) {
      reason = "the chunk there claims " + std::to_string(length) + " bytes, more than any writer makes";
      break;
    }
    uint32_t actual = internal::Crc32(0, head->data(), 8);
    std::optional<std::string_view> payload = src.Read(offset + internal::kChunkHeaderBytes, length);
    if (!payload) return IoError(At(name, offset) + "cannot read");
    actual = internal::Crc32(actual, payload->data(), payload->size());
#ifndef FUZZING_BUILD_MODE_UNSAFE_FOR_PRODUCTION  // see fuzz/CMakeLists.txt
    if (actual != crc) {
      reason = "the chunk there has a bad checksum";
      break;
    }
#else
    (void)crc;
#endif
    bool known = true;
    if (!DecodeChunk(static_cast<ChunkType>(type), *payload, visitor, scratch, &known)) {
      reason = "the chunk there (type " + std::to_string(type) + ") is malformed";
      break;
    }
    if (static_cast<ChunkType>(type) == ChunkType::kEnd) report.ended_cleanly = true;
    ++(known ? report.chunks_read : report.chunks_skipped);
    offset += internal::kChunkHeaderBytes + length;
  }
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

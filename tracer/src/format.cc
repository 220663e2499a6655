// Encoding of the header and chunks; see format.h and docs/trace-format.md.
#include "format.h"

#include <algorithm>
#include <type_traits>

#include "crc32.h"
#include "schema.h"

namespace pipetune::tracer::internal {
namespace {

// Long arrays are split so that no chunk is larger than a few MB: a reader
// holds one chunk in memory at a time, and a torn write loses at most one.
constexpr size_t kMaxRecordsPerChunk = 65536;

// Builds one chunk in place: the header is reserved by the constructor and
// filled (length, CRC) by Finish().
class ChunkBuilder {
 public:
  ChunkBuilder(std::string& out, ChunkType type) : out_(out), start_(out.size()), w_(out) {
    w_.U32(static_cast<uint32_t>(type));
    w_.U32(0);  // payload length, patched by Finish
    w_.U32(0);  // crc, patched by Finish
  }
  ByteWriter& w() { return w_; }
  void Finish() {
    size_t payload = out_.size() - start_ - kChunkHeaderBytes;
    Patch(start_ + 4, static_cast<uint32_t>(payload));
    uint32_t crc = Crc32(0, out_.data() + start_, 8);
    crc = Crc32(crc, out_.data() + start_ + kChunkHeaderBytes, payload);
    Patch(start_ + 8, crc);
  }

 private:
  void Patch(size_t at, uint32_t v) {
    for (int i = 0; i < 4; ++i) out_[at + i] = static_cast<char>(v >> (8 * i));
  }
  std::string& out_;
  size_t start_;
  ByteWriter w_;
};

// Writes `records` as chunks of `type`, each `count | record_bytes | records`
// (a GPU record is followed by its name's bytes).
template <typename T>
void AppendRecordChunks(std::string& out, ChunkType type, const std::vector<T>& records) {
  for (size_t first = 0; first < records.size(); first += kMaxRecordsPerChunk) {
    size_t n = std::min(kMaxRecordsPerChunk, records.size() - first);
    ChunkBuilder chunk(out, type);
    chunk.w().U32(static_cast<uint32_t>(n));
    chunk.w().U32(kRecordBytes<T>);
    for (size_t i = first; i < first + n; ++i) {
      WriteRecord(chunk.w(), records[i]);
      if constexpr (std::is_same_v<T, GpuActivity>) chunk.w().Bytes(records[i].name);
    }
    chunk.Finish();
  }
}

// One chunk holding one record.
template <typename T>
void AppendSingleRecordChunk(std::string& out, ChunkType type, const T& record) {
  ChunkBuilder chunk(out, type);
  WriteRecord(chunk.w(), record);
  chunk.Finish();
}

}  // namespace

std::string EncodeFilePreamble(const TraceHeader& h) {
  std::string body;
  ByteWriter w(body);
  WriteRecord(w, h);

  std::string out(kMagic, sizeof(kMagic));
  ByteWriter pre(out);
  pre.U32(h.format_version);
  pre.U32(static_cast<uint32_t>(body.size()));
  pre.U32(Crc32(0, body.data(), body.size()));
  pre.Bytes(body);
  return out;
}

void AppendStagesChunk(std::string& out, const std::vector<StageDef>& stages) {
  // Stage records hold strings, so they are not fixed-size: count, then each
  // record as id | parallelism | name | op.
  for (size_t first = 0; first < stages.size(); first += kMaxRecordsPerChunk) {
    size_t n = std::min(kMaxRecordsPerChunk, stages.size() - first);
    ChunkBuilder chunk(out, ChunkType::kStages);
    chunk.w().U32(static_cast<uint32_t>(n));
    for (size_t i = first; i < first + n; ++i) WriteRecord(chunk.w(), stages[i]);
    chunk.Finish();
  }
}

void AppendWorkersChunk(std::string& out, const std::vector<WorkerDef>& workers) {
  AppendRecordChunks(out, ChunkType::kWorkers, workers);
}

void AppendSnapshotChunk(std::string& out, uint64_t time_ns, const std::vector<StageSnapshot>& stages) {
  ChunkBuilder chunk(out, ChunkType::kSnapshot);
  ByteWriter& w = chunk.w();
  w.U64(time_ns);
  w.U32(static_cast<uint32_t>(stages.size()));
  w.U32(kRecordBytes<StageSnapshot>);
  for (const StageSnapshot& s : stages) WriteRecord(w, s);
  chunk.Finish();
}

void AppendConsumerTotalsChunk(std::string& out, const ConsumerTotals& t) {
  AppendSingleRecordChunk(out, ChunkType::kConsumerTotals, t);
}

void AppendProcessSampleChunk(std::string& out, const ProcessSample& p) {
  AppendSingleRecordChunk(out, ChunkType::kProcessSample, p);
}

void AppendDropsChunk(std::string& out, const DropCounts& d) {
  AppendSingleRecordChunk(out, ChunkType::kDrops, d);
}

void AppendSpansChunk(std::string& out, const std::vector<SpanRecord>& spans) {
  AppendRecordChunks(out, ChunkType::kSpans, spans);
}

void AppendConsumerStepsChunk(std::string& out, const std::vector<ConsumerStepRecord>& steps) {
  AppendRecordChunks(out, ChunkType::kConsumerSteps, steps);
}

void AppendGpuActivityChunk(std::string& out, const std::vector<GpuActivity>& activity) {
  AppendRecordChunks(out, ChunkType::kGpuActivity, activity);
}

void AppendGpuStatusChunk(std::string& out, const GpuStatus& status) {
  AppendSingleRecordChunk(out, ChunkType::kGpuStatus, status);
}

void AppendPipelineInfoChunk(std::string& out, const PipelineInfo& info) {
  AppendSingleRecordChunk(out, ChunkType::kPipelineInfo, info);
}

void AppendEndChunk(std::string& out, const TraceEnd& end) {
  AppendSingleRecordChunk(out, ChunkType::kEnd, end);
}

}  // namespace pipetune::tracer::internal

// Encoding of the header and chunks; see format.h and docs/trace-format.md.
#include "format.h"

#include <algorithm>

#include "crc32.h"

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

// Writes `records` as chunks of `type`, each `count | record_bytes | records`.
template <typename T, typename Fn>
void AppendRecordChunks(std::string& out, ChunkType type, uint32_t record_bytes,
                        const std::vector<T>& records, Fn write_record) {
  for (size_t first = 0; first < records.size(); first += kMaxRecordsPerChunk) {
    size_t n = std::min(kMaxRecordsPerChunk, records.size() - first);
    ChunkBuilder chunk(out, type);
    chunk.w().U32(static_cast<uint32_t>(n));
    chunk.w().U32(record_bytes);
    for (size_t i = first; i < first + n; ++i) write_record(chunk.w(), records[i]);
    chunk.Finish();
  }
}

}  // namespace

std::string EncodeFilePreamble(const TraceHeader& h) {
  std::string body;
  ByteWriter w(body);
  w.U32(h.pid);
  w.U32(h.snapshot_interval_ms);
  w.U32(h.spans_per_stage_per_second);
  w.U32(h.consumer_steps_per_second);
  w.U32(h.clock.clock_id);
  w.U64(h.clock.resolution_ns);
  w.U64(h.clock.start_ns);
  w.I64(h.clock.start_unix_ns);
  w.Str(h.clock.name);
  w.U32(h.host.cores_online);
  w.U32(h.host.cores_allowed);
  w.U32(h.host.cgroup_version);
  w.I64(h.host.cpu_quota_us);
  w.I64(h.host.cpu_period_us);
  w.I64(h.host.memory_limit_bytes);
  w.I64(h.host.memory_available_bytes);
  w.I64(h.host.memory_total_bytes);
  w.Str(h.host.hostname);
  w.Str(h.tracer_version);
  w.Str(h.pipeline.name);
  w.Str(h.pipeline.config_json);

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
    for (size_t i = first; i < first + n; ++i) {
      chunk.w().U32(stages[i].id);
      chunk.w().U32(stages[i].parallelism);
      chunk.w().Str(stages[i].name);
      chunk.w().Str(stages[i].op);
    }
    chunk.Finish();
  }
}

void AppendWorkersChunk(std::string& out, const std::vector<WorkerDef>& workers) {
  AppendRecordChunks(out, ChunkType::kWorkers, kWorkerRecordBytes, workers,
                     [](ByteWriter& w, const WorkerDef& d) {
                       w.U32(d.worker);
                       w.U32(d.stage);
                       w.U32(d.os_tid);
                       w.U32(0);
                       w.U64(d.attach_ns);
                     });
}

void AppendSnapshotChunk(std::string& out, uint64_t time_ns, const std::vector<StageSnapshot>& stages) {
  ChunkBuilder chunk(out, ChunkType::kSnapshot);
  ByteWriter& w = chunk.w();
  w.U64(time_ns);
  w.U32(static_cast<uint32_t>(stages.size()));
  w.U32(kStageSnapshotRecordBytes);
  for (const StageSnapshot& s : stages) {
    w.U32(s.stage);
    w.U32(s.parallelism);
    w.U32(s.live_workers);
    w.U32(0);
    w.U64(s.produced);
    w.U64(s.consumed);
    w.U64(s.bytes_produced);
    w.U64(s.cpu_ns);
    w.U64(s.work_ns);
    w.U64(s.wait_input_ns);
    w.U64(s.wait_output_ns);
    w.I64(s.occupancy_elements);
    w.I64(s.occupancy_bytes);
    w.U64(s.spans_recorded);
    w.U64(s.spans_dropped);
  }
  chunk.Finish();
}

void AppendConsumerTotalsChunk(std::string& out, const ConsumerTotals& t) {
  ChunkBuilder chunk(out, ChunkType::kConsumerTotals);
  ByteWriter& w = chunk.w();
  w.U64(t.time_ns);
  w.U64(t.steps);
  w.U64(t.wait_ns);
  w.U64(t.step_ns);
  w.U64(t.steps_recorded);
  w.U64(t.steps_dropped);
  chunk.Finish();
}

void AppendProcessSampleChunk(std::string& out, const ProcessSample& p) {
  ChunkBuilder chunk(out, ChunkType::kProcessSample);
  ByteWriter& w = chunk.w();
  w.U64(p.time_ns);
  w.U64(p.cpu_ns);
  w.U64(p.rss_bytes);
  w.I64(p.read_bytes);
  w.I64(p.read_syscall_bytes);
  w.U32(p.threads);
  w.U32(0);
  chunk.Finish();
}

void AppendDropsChunk(std::string& out, const DropCounts& d) {
  ChunkBuilder chunk(out, ChunkType::kDrops);
  ByteWriter& w = chunk.w();
  w.U64(d.time_ns);
  w.U64(d.spans);
  w.U64(d.consumer_steps);
  w.U64(d.gpu_records);
  w.U64(d.gpu_records_at_source);
  chunk.Finish();
}

void AppendSpansChunk(std::string& out, const std::vector<SpanRecord>& spans) {
  AppendRecordChunks(out, ChunkType::kSpans, kSpanRecordBytes, spans, [](ByteWriter& w, const SpanRecord& s) {
    w.U32(s.stage);
    w.U32(s.worker);
    w.U64(s.element_id);
    w.U64(s.begin_ns);
    w.U64(s.end_ns);
  });
}

void AppendConsumerStepsChunk(std::string& out, const std::vector<ConsumerStepRecord>& steps) {
  AppendRecordChunks(out, ChunkType::kConsumerSteps, kConsumerStepRecordBytes, steps,
                     [](ByteWriter& w, const ConsumerStepRecord& s) {
                       w.U32(s.consumer);
                       w.U32(0);
                       w.U64(s.end_ns);
                       w.U64(s.wait_ns);
                       w.U64(s.step_ns);
                     });
}

void AppendGpuActivityChunk(std::string& out, const std::vector<GpuActivity>& activity) {
  AppendRecordChunks(out, ChunkType::kGpuActivity, kGpuRecordFixedBytes, activity,
                     [](ByteWriter& w, const GpuActivity& a) {
                       w.U32(static_cast<uint32_t>(a.kind));
                       w.U32(a.device);
                       w.U32(a.stream);
                       w.U32(static_cast<uint32_t>(a.name.size()));
                       w.U64(a.start_ns);
                       w.U64(a.end_ns);
                       w.U64(a.bytes);
                       w.U64(a.correlation_id);
                       w.Bytes(a.name);
                     });
}

void AppendPipelineInfoChunk(std::string& out, const PipelineInfo& info) {
  ChunkBuilder chunk(out, ChunkType::kPipelineInfo);
  chunk.w().Str(info.name);
  chunk.w().Str(info.config_json);
  if (!info.config_path.empty()) chunk.w().Str(info.config_path);
  chunk.Finish();
}

void AppendEndChunk(std::string& out, const TraceEnd& end) {
  ChunkBuilder chunk(out, ChunkType::kEnd);
  chunk.w().U64(end.time_ns);
  chunk.Finish();
}

}  // namespace pipetune::tracer::internal

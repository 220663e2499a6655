// The trace file's byte layout, shared by the writer (format.cc) and the
// reader (reader.cc). docs/trace-format.md is the specification; this file
// must agree with it.
//
// File:   magic[8] | u32 version | u32 header_bytes | u32 header_crc | header
// Chunk:  u32 type | u32 payload_bytes | u32 crc | payload
//         crc = CRC-32 of the type and length fields (8 bytes) then the payload.
// All integers little-endian. A string is u32 length then its bytes.
// Arrays of fixed records are u32 count | u32 record_bytes | records, so a
// later version may append fields to a record; readers ignore the bytes past
// the fields they know, in records, payloads and the header alike.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "pipetune/tracer/reader.h"
#include "pipetune/tracer/records.h"

namespace pipetune::tracer::internal {

inline constexpr char kMagic[8] = {'\x89', 'P', 'T', 'T', 'R', 'A', 'C', 'E'};
inline constexpr size_t kFilePreambleBytes = 20;  // magic, version, length, crc
inline constexpr size_t kChunkHeaderBytes = 12;

enum class ChunkType : uint32_t {
  kStages = 1,
  kWorkers = 2,
  kSnapshot = 3,
  kConsumerTotals = 4,
  kProcessSample = 5,
  kDrops = 6,
  kSpans = 7,
  kConsumerSteps = 8,
  kGpuActivity = 9,
  kPipelineInfo = 10,
  kEnd = 11,
  kGpuStatus = 12,
};

// Record layouts and their sizes: schema.h.

// Appends little-endian values to a byte string.
class ByteWriter {
 public:
  explicit ByteWriter(std::string& out) : out_(out) {}
  void U32(uint32_t v) {
    char b[4];
    for (int i = 0; i < 4; ++i) b[i] = static_cast<char>(v >> (8 * i));
    out_.append(b, 4);
  }
  void U64(uint64_t v) {
    char b[8];
    for (int i = 0; i < 8; ++i) b[i] = static_cast<char>(v >> (8 * i));
    out_.append(b, 8);
  }
  void I64(int64_t v) { U64(static_cast<uint64_t>(v)); }
  void Str(std::string_view s) {
    U32(static_cast<uint32_t>(s.size()));
    out_.append(s.data(), s.size());
  }
  void Bytes(std::string_view s) { out_.append(s.data(), s.size()); }
  size_t size() const { return out_.size(); }
  std::string& buffer() { return out_; }

 private:
  std::string& out_;
};

// Reads little-endian values from a byte range. Never reads out of bounds:
// a read past the end sets failed() and yields zero / empty.
class ByteReader {
 public:
  explicit ByteReader(std::string_view data) : data_(data) {}
  uint32_t U32() {
    if (!Need(4)) return 0;
    uint32_t v = 0;
    for (int i = 0; i < 4; ++i)
      v |= static_cast<uint32_t>(static_cast<unsigned char>(data_[pos_ + i])) << (8 * i);
    pos_ += 4;
    return v;
  }
  uint64_t U64() {
    if (!Need(8)) return 0;
    uint64_t v = 0;
    for (int i = 0; i < 8; ++i)
      v |= static_cast<uint64_t>(static_cast<unsigned char>(data_[pos_ + i])) << (8 * i);
    pos_ += 8;
    return v;
  }
  int64_t I64() { return static_cast<int64_t>(U64()); }
  // A length-prefixed string; the length is checked against what is left
  // before anything is copied, so a hostile length cannot allocate.
  std::string Str() {
    uint32_t n = U32();
    if (!Need(n)) return {};
    std::string s(data_.substr(pos_, n));
    pos_ += n;
    return s;
  }
  std::string_view Take(size_t n) {
    if (!Need(n)) return {};
    std::string_view s = data_.substr(pos_, n);
    pos_ += n;
    return s;
  }
  void Skip(size_t n) { Take(n); }
  bool failed() const { return failed_; }
  size_t remaining() const { return data_.size() - pos_; }
  size_t position() const { return pos_; }

 private:
  bool Need(size_t n) {
    if (failed_ || n > data_.size() - pos_) {
      failed_ = true;
      return false;
    }
    return true;
  }
  std::string_view data_;
  size_t pos_ = 0;
  bool failed_ = false;
};

// Writing. Each Append* adds one whole chunk (or, for long arrays, several) to
// `out`; EncodeFilePreamble returns the bytes before the first chunk.
std::string EncodeFilePreamble(const TraceHeader& header);
void AppendStagesChunk(std::string& out, const std::vector<StageDef>& stages);
void AppendWorkersChunk(std::string& out, const std::vector<WorkerDef>& workers);
void AppendSnapshotChunk(std::string& out, uint64_t time_ns, const std::vector<StageSnapshot>& stages);
void AppendConsumerTotalsChunk(std::string& out, const ConsumerTotals& totals);
void AppendProcessSampleChunk(std::string& out, const ProcessSample& sample);
void AppendDropsChunk(std::string& out, const DropCounts& drops);
void AppendSpansChunk(std::string& out, const std::vector<SpanRecord>& spans);
void AppendConsumerStepsChunk(std::string& out, const std::vector<ConsumerStepRecord>& steps);
void AppendGpuActivityChunk(std::string& out, const std::vector<GpuActivity>& activity);
void AppendPipelineInfoChunk(std::string& out, const PipelineInfo& info);
void AppendGpuStatusChunk(std::string& out, const GpuStatus& status);
void AppendEndChunk(std::string& out, const TraceEnd& end);

}  // namespace pipetune::tracer::internal

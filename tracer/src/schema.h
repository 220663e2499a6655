// Each trace record's layout, described once. A `Fields(record, f)` overload
// lists a record's fields in file order, each with its wire type; the writer
// (format.cc), the reader (reader.cc) and the size checks below all walk that
// one list, so they cannot disagree. docs/trace-format.md is the
// specification; the static_asserts at the bottom pin the fixed record sizes
// it states.
//
// Wire types: kU32, kU64, kI64 (little-endian), kPad32 (four zero bytes),
// kStr (u32 length then bytes), kStrLen32 (only the u32 length of a string
// whose bytes follow the fixed record; GPU names). kAppended marks the end of
// the version-1 fields: fields after it were appended later, so a reader
// finds them absent in older traces (it leaves them at their defaults) and
// the minimum record size a reader demands stops there.
#pragma once

#include <concepts>
#include <cstdint>
#include <string>
#include <type_traits>

#include "format.h"

namespace pipetune::tracer::internal {

struct U32Wire {};
struct U64Wire {};
struct I64Wire {};
struct Pad32Wire {};
struct StrWire {};
struct StrLen32Wire {};
struct AppendedMark {};
inline constexpr U32Wire kU32;
inline constexpr U64Wire kU64;
inline constexpr I64Wire kI64;
inline constexpr Pad32Wire kPad32;
inline constexpr StrWire kStr;
inline constexpr StrLen32Wire kStrLen32;
inline constexpr AppendedMark kAppended;

// R is T or const T: one list serves the writer (const) and the reader.
template <class R, class T>
concept RecordOf = std::same_as<std::remove_const_t<R>, T>;

template <RecordOf<TraceHeader> R, class F>
constexpr void Fields(R& h, F&& f) {
  f(kU32, h.pid);
  f(kU32, h.snapshot_interval_ms);
  f(kU32, h.spans_per_stage_per_second);
  f(kU32, h.consumer_steps_per_second);
  f(kU32, h.clock.clock_id);
  f(kU64, h.clock.resolution_ns);
  f(kU64, h.clock.start_ns);
  f(kI64, h.clock.start_unix_ns);
  f(kStr, h.clock.name);
  f(kU32, h.host.cores_online);
  f(kU32, h.host.cores_allowed);
  f(kU32, h.host.cgroup_version);
  f(kI64, h.host.cpu_quota_us);
  f(kI64, h.host.cpu_period_us);
  f(kI64, h.host.memory_limit_bytes);
  f(kI64, h.host.memory_available_bytes);
  f(kI64, h.host.memory_total_bytes);
  f(kStr, h.host.hostname);
  f(kStr, h.tracer_version);
  f(kStr, h.pipeline.name);
  f(kStr, h.pipeline.config_json);
  f(kAppended);
  f(kStr, h.pipeline.config_path);
}

template <RecordOf<StageDef> R, class F>
constexpr void Fields(R& d, F&& f) {
  f(kU32, d.id);
  f(kU32, d.parallelism);
  f(kStr, d.name);
  f(kStr, d.op);
}

template <RecordOf<WorkerDef> R, class F>
constexpr void Fields(R& d, F&& f) {
  f(kU32, d.worker);
  f(kU32, d.stage);
  f(kU32, d.os_tid);
  f(kPad32);
  f(kU64, d.attach_ns);
}

// time_ns is the snapshot chunk's, not the record's.
template <RecordOf<StageSnapshot> R, class F>
constexpr void Fields(R& s, F&& f) {
  f(kU32, s.stage);
  f(kU32, s.parallelism);
  f(kU32, s.live_workers);
  f(kPad32);
  f(kU64, s.produced);
  f(kU64, s.consumed);
  f(kU64, s.bytes_produced);
  f(kU64, s.cpu_ns);
  f(kU64, s.work_ns);
  f(kU64, s.wait_input_ns);
  f(kU64, s.wait_output_ns);
  f(kI64, s.occupancy_elements);
  f(kI64, s.occupancy_bytes);
  f(kU64, s.spans_recorded);
  f(kU64, s.spans_dropped);
  f(kAppended);
  f(kU64, s.epoch_elements);
}

template <RecordOf<ConsumerTotals> R, class F>
constexpr void Fields(R& t, F&& f) {
  f(kU64, t.time_ns);
  f(kU64, t.steps);
  f(kU64, t.wait_ns);
  f(kU64, t.step_ns);
  f(kU64, t.steps_recorded);
  f(kU64, t.steps_dropped);
}

template <RecordOf<ProcessSample> R, class F>
constexpr void Fields(R& p, F&& f) {
  f(kU64, p.time_ns);
  f(kU64, p.cpu_ns);
  f(kU64, p.rss_bytes);
  f(kI64, p.read_bytes);
  f(kI64, p.read_syscall_bytes);
  f(kU32, p.threads);
  f(kPad32);
  f(kAppended);
  f(kI64, p.main_thread_run_delay_ns);
  f(kI64, p.recorder_cpu_ns);
}

template <RecordOf<DropCounts> R, class F>
constexpr void Fields(R& d, F&& f) {
  f(kU64, d.time_ns);
  f(kU64, d.spans);
  f(kU64, d.consumer_steps);
  f(kU64, d.gpu_records);
  f(kU64, d.gpu_records_at_source);
}

template <RecordOf<SpanRecord> R, class F>
constexpr void Fields(R& s, F&& f) {
  f(kU32, s.stage);
  f(kU32, s.worker);
  f(kU64, s.element_id);
  f(kU64, s.begin_ns);
  f(kU64, s.end_ns);
}

template <RecordOf<ConsumerStepRecord> R, class F>
constexpr void Fields(R& s, F&& f) {
  f(kU32, s.consumer);
  f(kPad32);
  f(kU64, s.end_ns);
  f(kU64, s.wait_ns);
  f(kU64, s.step_ns);
}

// The name's bytes follow the fixed record (after any appended fields).
template <RecordOf<GpuActivity> R, class F>
constexpr void Fields(R& a, F&& f) {
  f(kU32, a.kind);
  f(kU32, a.device);
  f(kU32, a.stream);
  f(kStrLen32, a.name);
  f(kU64, a.start_ns);
  f(kU64, a.end_ns);
  f(kU64, a.bytes);
  f(kU64, a.correlation_id);
  f(kAppended);
  f(kU32, a.context);
  f(kU32, a.copy_kind);
}

template <RecordOf<GpuStatus> R, class F>
constexpr void Fields(R& s, F&& f) {
  f(kU64, s.time_ns);
  f(kU32, s.state);
  f(kU32, s.cupti_version);
  f(kU32, s.clock_source);
  f(kPad32);
  f(kI64, s.clock_offset_ns);
  f(kStr, s.message);
}

template <RecordOf<PipelineInfo> R, class F>
constexpr void Fields(R& p, F&& f) {
  f(kStr, p.name);
  f(kStr, p.config_json);
  f(kAppended);
  f(kStr, p.config_path);
}

template <RecordOf<TraceEnd> R, class F>
constexpr void Fields(R& e, F&& f) {
  f(kU64, e.time_ns);
}

// Writes a record's fields.
class FieldWriter {
 public:
  explicit FieldWriter(ByteWriter& w) : w_(w) {}
  template <class T>
  void operator()(U32Wire, const T& v) {
    w_.U32(static_cast<uint32_t>(v));
  }
  template <class T>
  void operator()(U64Wire, const T& v) {
    w_.U64(static_cast<uint64_t>(v));
  }
  template <class T>
  void operator()(I64Wire, const T& v) {
    w_.I64(static_cast<int64_t>(v));
  }
  void operator()(Pad32Wire) { w_.U32(0); }
  void operator()(StrWire, const std::string& s) { w_.Str(s); }
  void operator()(StrLen32Wire, const std::string& s) { w_.U32(static_cast<uint32_t>(s.size())); }
  void operator()(AppendedMark) {}

 private:
  ByteWriter& w_;
};

// Reads a record's fields. Fields after kAppended are read only while bytes
// remain (an older writer's record ends before them). A kStrLen32 length is
// kept in trailing_bytes for the caller, which takes the bytes after the
// record; nothing is allocated for it here.
class FieldReader {
 public:
  explicit FieldReader(ByteReader& r) : r_(r) {}
  template <class T>
  void operator()(U32Wire, T& v) {
    if (Present()) v = static_cast<T>(r_.U32());
  }
  template <class T>
  void operator()(U64Wire, T& v) {
    if (Present()) v = static_cast<T>(r_.U64());
  }
  template <class T>
  void operator()(I64Wire, T& v) {
    if (Present()) v = static_cast<T>(r_.I64());
  }
  void operator()(Pad32Wire) {
    if (Present()) r_.U32();
  }
  void operator()(StrWire, std::string& s) {
    if (Present()) s = r_.Str();
  }
  void operator()(StrLen32Wire, std::string&) {
    if (Present()) trailing_bytes = r_.U32();
  }
  void operator()(AppendedMark) { appended_ = true; }
  uint32_t trailing_bytes = 0;

 private:
  bool Present() const { return !appended_ || r_.remaining() > 0; }
  ByteReader& r_;
  bool appended_ = false;
};

// The size of a record's fixed part: `bytes` as written now, `v1_bytes` up to
// kAppended (the least a reader accepts). `variable` when it holds a kStr.
struct RecordSize {
  uint32_t bytes = 0;
  uint32_t v1_bytes = 0;
  bool variable = false;
  bool appended = false;
  constexpr void Add(uint32_t n) {
    bytes += n;
    if (!appended) v1_bytes += n;
  }
  template <class T>
  constexpr void operator()(U32Wire, const T&) {
    Add(4);
  }
  template <class T>
  constexpr void operator()(U64Wire, const T&) {
    Add(8);
  }
  template <class T>
  constexpr void operator()(I64Wire, const T&) {
    Add(8);
  }
  constexpr void operator()(Pad32Wire) { Add(4); }
  constexpr void operator()(StrWire, const std::string&) { variable = true; }
  constexpr void operator()(StrLen32Wire, const std::string&) { Add(4); }
  constexpr void operator()(AppendedMark) { appended = true; }
};

template <class T>
constexpr RecordSize MeasureRecord() {
  // The record is never constructed: RecordSize only looks at the field
  // kinds, and clang 14 cannot construct libstdc++ 12's std::string (a
  // record's name) in a constant expression. Naming the members of a union
  // member that was never made active is allowed; reading them would not be.
  union Storage {
    constexpr Storage() : none() {}
    constexpr ~Storage() {}
    char none;
    T record;
  } storage;
  RecordSize size;
  Fields(storage.record, size);
  return size;
}

// Fixed record sizes: what the writer puts in record_bytes, and the least a
// reader accepts there.
template <class T>
inline constexpr uint32_t kRecordBytes = MeasureRecord<T>().bytes;
template <class T>
inline constexpr uint32_t kMinRecordBytes = MeasureRecord<T>().v1_bytes;

// The sizes docs/trace-format.md gives for the version-1 records.
static_assert(!MeasureRecord<WorkerDef>().variable && kMinRecordBytes<WorkerDef> == 24);
static_assert(!MeasureRecord<StageSnapshot>().variable && kMinRecordBytes<StageSnapshot> == 104);
static_assert(!MeasureRecord<SpanRecord>().variable && kMinRecordBytes<SpanRecord> == 32);
static_assert(!MeasureRecord<ConsumerStepRecord>().variable && kMinRecordBytes<ConsumerStepRecord> == 32);
static_assert(!MeasureRecord<GpuActivity>().variable && kMinRecordBytes<GpuActivity> == 48);
static_assert(kRecordBytes<GpuActivity> == 56);  // context and copy kind appended
static_assert(kMinRecordBytes<ProcessSample> == 48 &&
              kRecordBytes<ProcessSample> == 64);  // run delay, then the recorder's CPU appended
static_assert(kRecordBytes<ConsumerTotals> == 48 && kRecordBytes<DropCounts> == 40 &&
              kRecordBytes<TraceEnd> == 8);

// A whole record, as written and read by the chunk codecs.
template <class T>
void WriteRecord(ByteWriter& w, const T& record) {
  Fields(record, FieldWriter(w));
}
// Returns the kStrLen32 length (0 when the record has none).
template <class T>
uint32_t ReadRecord(ByteReader& r, T& record) {
  FieldReader reader(r);
  Fields(record, reader);
  return reader.trailing_bytes;
}

}  // namespace pipetune::tracer::internal

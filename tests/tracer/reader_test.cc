// The reader: clear errors for files it cannot read at all, and truncated or
// corrupt traces read up to the last whole chunk with a warning that says how
// much was lost. Also replays the inputs the fuzzer found (regressions/).
#include "pipetune/tracer/reader.h"

#include <dirent.h>
#include <gtest/gtest.h>

#include <cstring>
#include <sstream>

#include "crc32.h"
#include "pipetune/tracer/chrome_export.h"
#include "test_util.h"

namespace pipetune::tracer {
namespace {

using testing::ReadFileBytes;
using testing::TempTracePath;
using testing::WriteFileBytes;

class Reader : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    path_ = new std::string(TempTracePath("reader_base"));
    testing::RecordSmallTrace(*path_, 150);
    bytes_ = new std::string(ReadFileBytes(*path_));
  }
  static void TearDownTestSuite() {
    delete path_;
    delete bytes_;
  }
  static const std::string& bytes() { return *bytes_; }

  // Writes `content` to a fresh file and returns its path.
  static std::string WriteTrace(const std::string& name, const std::string& content) {
    std::string path = TempTracePath(name);
    WriteFileBytes(path, content);
    return path;
  }

 private:
  static std::string* path_;
  static std::string* bytes_;
};
std::string* Reader::path_ = nullptr;
std::string* Reader::bytes_ = nullptr;

void PutU32(std::string& s, size_t at, uint32_t v) {
  for (int i = 0; i < 4; ++i) s[at + i] = static_cast<char>(v >> (8 * i));
}
void AppendU32(std::string& s, uint32_t v) {
  s.append(4, '\0');
  PutU32(s, s.size() - 4, v);
}

// A chunk with a valid checksum, as the writer frames it.
std::string Chunk(uint32_t type, const std::string& payload) {
  std::string c;
  AppendU32(c, type);
  AppendU32(c, static_cast<uint32_t>(payload.size()));
  uint32_t crc = internal::Crc32(0, c.data(), 8);
  crc = internal::Crc32(crc, payload.data(), payload.size());
  AppendU32(c, crc);
  return c + payload;
}

// The offset of the first chunk: after the 20-byte preamble and the header.
size_t FirstChunk(const std::string& bytes) {
  uint32_t header = 0;
  std::memcpy(&header, bytes.data() + 12, 4);
  return 20 + header;
}

// A cut inside the payload of the chunk that holds the trace's middle byte.
// Half the file's length can land on a chunk boundary (the trace is recorded
// anew each run), and a cut there is a whole trace, not a truncated one.
size_t MidPayload(const std::string& bytes) {
  size_t at = FirstChunk(bytes);
  while (at + 12 <= bytes.size()) {
    uint32_t len = 0;
    std::memcpy(&len, bytes.data() + at + 4, 4);
    size_t end = at + 12 + len;
    if (end > bytes.size() / 2 && len >= 2) return at + 12 + len / 2;
    at = end;
  }
  return bytes.size() - 1;
}

TEST_F(Reader, WholeTraceReadsCleanly) {
  StatusOr<Trace> trace = LoadTraceFromMemory(bytes(), "base");
  ASSERT_TRUE(trace.ok()) << trace.status().message();
  EXPECT_FALSE(trace->report.truncated());
  EXPECT_TRUE(trace->report.warning.empty());
  EXPECT_TRUE(trace->report.ended_cleanly);
  EXPECT_EQ(trace->report.bytes_read, bytes().size());
  EXPECT_GT(trace->report.chunks_read, 10u);
  EXPECT_GE(trace->consumer_totals.size(), 3u);
  EXPECT_EQ(trace->header.pipeline.config_json, R"({"name":"small"})");
}

TEST_F(Reader, FileThatIsNotATraceIsAnError) {
  std::string path = WriteTrace("not_a_trace", "{\"name\": \"a config, not a trace\"}\n");
  StatusOr<Trace> trace = LoadTrace(path);
  ASSERT_FALSE(trace.ok());
  EXPECT_EQ(trace.status().code(), StatusCode::kInvalidInput);
  EXPECT_NE(trace.status().message().find(path), std::string::npos);
  EXPECT_NE(trace.status().message().find("byte 0"), std::string::npos);
  EXPECT_NE(trace.status().message().find("not a pipetune trace"), std::string::npos);

  EXPECT_FALSE(LoadTrace(WriteTrace("empty", "")).ok());
  StatusOr<Trace> missing = LoadTrace("/nonexistent/trace");
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
}

TEST_F(Reader, NewerFormatVersionIsAnError) {
  std::string newer = bytes();
  PutU32(newer, 8, 99);
  StatusOr<Trace> trace = LoadTrace(WriteTrace("newer", newer));
  ASSERT_FALSE(trace.ok());
  EXPECT_NE(trace.status().message().find("version 99 is newer"), std::string::npos)
      << trace.status().message();
  EXPECT_NE(trace.status().message().find("byte 8"), std::string::npos);
}

TEST_F(Reader, UnreadableHeaderIsAnError) {
  StatusOr<Trace> cut = LoadTrace(WriteTrace("cut_header", bytes().substr(0, 30)));
  ASSERT_FALSE(cut.ok());
  EXPECT_NE(cut.status().message().find("unreadable header"), std::string::npos) << cut.status().message();

  std::string flipped = bytes();
  flipped[24] ^= 0x40;
  StatusOr<Trace> bad = LoadTrace(WriteTrace("bad_header", flipped));
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("checksum"), std::string::npos) << bad.status().message();
}

TEST_F(Reader, TruncatedTraceReadsUpToItsLastWholeChunk) {
  StatusOr<Trace> whole = LoadTraceFromMemory(bytes());
  ASSERT_TRUE(whole.ok());
  for (size_t cut : {bytes().size() - 1, bytes().size() - 9, MidPayload(bytes()), FirstChunk(bytes()) + 5}) {
    SCOPED_TRACE("cut at " + std::to_string(cut));
    std::string path = WriteTrace("truncated", bytes().substr(0, cut));
    StatusOr<Trace> trace = LoadTrace(path);
    ASSERT_TRUE(trace.ok()) << trace.status().message();
    const ReadReport& r = trace->report;
    EXPECT_TRUE(r.truncated());
    EXPECT_FALSE(r.ended_cleanly);
    EXPECT_EQ(r.bytes_read + r.bytes_not_read, cut);
    EXPECT_LT(r.chunks_read, whole->report.chunks_read);
    EXPECT_NE(r.warning.find("trace truncated at byte " + std::to_string(r.bytes_read) + ": " +
                             std::to_string(r.bytes_not_read) + " bytes ("),
              std::string::npos)
        << r.warning;
    EXPECT_NE(r.warning.find("after the last whole chunk were not read"), std::string::npos);
    EXPECT_NE(r.warning.find(path), std::string::npos);
    EXPECT_LE(trace->snapshots.size(), whole->snapshots.size());
  }
}

// Counts what a visitor is given: a tail read in pieces must give the same.
struct Counts : TraceVisitor {
  int headers = 0;
  uint64_t snapshots = 0, steps = 0, ends = 0;
  void OnHeader(const TraceHeader&) override { ++headers; }
  void OnSnapshot(const StageSnapshot&) override { ++snapshots; }
  void OnConsumerStep(const ConsumerStepRecord&) override { ++steps; }
  void OnEnd(const TraceEnd&) override { ++ends; }
};

TEST_F(Reader, ATailReadAsTheTraceGrowsSeesEachRecordOnce) {
  Counts whole;
  StatusOr<ReadReport> whole_report = ReadTraceFromMemory(bytes(), whole);
  ASSERT_TRUE(whole_report.ok());
  // The file as a live writer leaves it: cut inside a chunk, then inside
  // another, then whole.
  std::string path = WriteTrace("tail", bytes().substr(0, bytes().size() / 3));
  TraceTail tail(path);
  Counts seen;
  StatusOr<ReadReport> first = tail.ReadMore(seen);
  ASSERT_TRUE(first.ok()) << first.status().message();
  EXPECT_TRUE(first->truncated());  // the chunk being written is left for later
  uint64_t first_snapshots = seen.snapshots;
  EXPECT_LT(first_snapshots, whole.snapshots);  // the last snapshot is in the last chunks

  WriteFileBytes(path, bytes().substr(0, 2 * bytes().size() / 3));
  ASSERT_TRUE(tail.ReadMore(seen).ok());
  EXPECT_GE(seen.snapshots, first_snapshots);
  WriteFileBytes(path, bytes());
  StatusOr<ReadReport> last = tail.ReadMore(seen);
  ASSERT_TRUE(last.ok());
  EXPECT_FALSE(last->truncated());
  EXPECT_TRUE(last->ended_cleanly);
  EXPECT_EQ(last->bytes_read, bytes().size());
  EXPECT_EQ(last->chunks_read, whole_report->chunks_read);
  EXPECT_EQ(seen.headers, 1);
  EXPECT_EQ(seen.snapshots, whole.snapshots);
  EXPECT_EQ(seen.steps, whole.steps);
  EXPECT_EQ(seen.ends, 1u);
  // Nothing appended: nothing read again.
  ASSERT_TRUE(tail.ReadMore(seen).ok());
  EXPECT_EQ(seen.snapshots, whole.snapshots);
}

TEST_F(Reader, CutAtAChunkBoundaryIsNotTruncatedButHasNoEnd) {
  // The end record is the last chunk: 12 bytes of header + 8 of payload.
  std::string cut = bytes().substr(0, bytes().size() - 20);
  StatusOr<Trace> trace = LoadTraceFromMemory(cut);
  ASSERT_TRUE(trace.ok());
  EXPECT_FALSE(trace->report.truncated());
  EXPECT_FALSE(trace->report.ended_cleanly);
  EXPECT_FALSE(trace->has_end);
}

TEST_F(Reader, CorruptChunkStopsReadingBeforeIt) {
  std::string corrupt = bytes();
  size_t at = corrupt.size() / 2;
  corrupt[at] ^= 0x01;
  StatusOr<Trace> trace = LoadTraceFromMemory(corrupt);
  ASSERT_TRUE(trace.ok());
  const ReadReport& r = trace->report;
  EXPECT_TRUE(r.truncated());
  EXPECT_LE(r.bytes_read, at);
  EXPECT_NE(r.stop_reason.find("checksum"), std::string::npos) << r.stop_reason;
  EXPECT_NE(r.warning.find("trace truncated at byte"), std::string::npos);
}

TEST_F(Reader, UnknownChunkTypesFromNewerWritersAreSkipped) {
  std::string extended = bytes() + Chunk(999, "future record");
  StatusOr<Trace> trace = LoadTraceFromMemory(extended);
  ASSERT_TRUE(trace.ok());
  EXPECT_FALSE(trace->report.truncated());
  EXPECT_EQ(trace->report.chunks_skipped, 1u);
}

TEST_F(Reader, HostileCountsAndLengthsStopReadingSafely) {
  std::string head = bytes().substr(0, FirstChunk(bytes()));
  // A snapshot claiming 2^32-1 records in a 16-byte payload.
  std::string huge_count(8, '\0');
  AppendU32(huge_count, 0xffffffffu);
  AppendU32(huge_count, 104);
  // A chunk claiming 4 GiB.
  std::string huge_chunk;
  AppendU32(huge_chunk, 3);
  AppendU32(huge_chunk, 0xffffffffu);
  AppendU32(huge_chunk, 0);
  // A string length beyond the payload.
  std::string huge_string;
  AppendU32(huge_string, 0xfffffff0u);
  for (const std::string& tail :
       {Chunk(3, huge_count), huge_chunk, Chunk(10, huge_string), Chunk(1, huge_string)}) {
    StatusOr<Trace> trace = LoadTraceFromMemory(head + tail);
    ASSERT_TRUE(trace.ok());
    EXPECT_TRUE(trace->report.truncated());
    EXPECT_EQ(trace->report.bytes_read, head.size());
    EXPECT_TRUE(trace->snapshots.empty());
  }
}

TEST_F(Reader, HeaderAloneIsReadCheaply) {
  std::string path = WriteTrace("header_only", bytes());
  StatusOr<TraceHeader> header = ReadTraceHeader(path);
  ASSERT_TRUE(header.ok());
  EXPECT_EQ(header->pipeline.name, "small");
  EXPECT_EQ(header->clock.name, "CLOCK_MONOTONIC");
  EXPECT_GT(header->clock.start_ns, 0u);
}

TEST_F(Reader, DescribeSaysWhatIsInTheTrace) {
  std::string path = WriteTrace("describe", bytes());
  StatusOr<std::string> text = DescribeTrace(path);
  ASSERT_TRUE(text.ok()) << text.status().message();
  EXPECT_NE(text->find("format version 1"), std::string::npos) << *text;
  EXPECT_NE(text->find("map (map)"), std::string::npos) << *text;
  EXPECT_NE(text->find("source (range)"), std::string::npos) << *text;
  EXPECT_NE(text->find("drops: none"), std::string::npos) << *text;
  EXPECT_EQ(text->find("warning"), std::string::npos) << *text;

  std::string truncated = WriteTrace("describe_cut", bytes().substr(0, bytes().size() - 3));
  StatusOr<std::string> cut_text = DescribeTrace(truncated);
  ASSERT_TRUE(cut_text.ok());
  EXPECT_NE(cut_text->find("warning: " + truncated + ": trace truncated at byte"), std::string::npos)
      << *cut_text;
}

// Every input the fuzzer found a problem with stays here, and must read (or
// fail) without crashing; ASan/UBSan builds check the rest.
TEST(ReaderRegressions, FuzzerFindingsReadSafely) {
  std::string dir = std::string(PIPETUNE_TRACER_TEST_DIR) + "/regressions";
  DIR* d = opendir(dir.c_str());
  ASSERT_NE(d, nullptr) << dir;
  int files = 0;
  while (dirent* e = readdir(d)) {
    std::string name = e->d_name;
    if (name == "." || name == ".." || name == "README.md") continue;
    SCOPED_TRACE(name);
    std::string input = ReadFileBytes(dir + "/" + name);
    StatusOr<Trace> trace = LoadTraceFromMemory(input, name);
    if (trace.ok()) {
      EXPECT_EQ(trace->report.bytes_read + trace->report.bytes_not_read, input.size());
    }
    std::ostringstream json;
    (void)ExportChromeFromMemory(input, json);
    ++files;
  }
  closedir(d);
  EXPECT_GT(files, 0);
}

}  // namespace
}  // namespace pipetune::tracer

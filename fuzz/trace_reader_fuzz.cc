// libFuzzer target for the trace reader and everything that consumes it:
// the streaming visitor, LoadTrace, and the Chrome export. Any input must be
// read or refused with a Status; never a crash, a leak, undefined behaviour
// or an allocation out of proportion to the input.
#include <cstddef>
#include <cstdint>
#include <sstream>
#include <string_view>

#include "pipetune/base/check.h"
#include "pipetune/tracer/chrome_export.h"
#include "pipetune/tracer/reader.h"

namespace {

// Touches every field so the sanitizers check what the decoder produced.
class CheckingVisitor : public pipetune::tracer::TraceVisitor {
 public:
  void OnStage(const pipetune::tracer::StageDef& d) override { sum_ += d.name.size() + d.op.size(); }
  void OnSpan(const pipetune::tracer::SpanRecord& s) override { sum_ += s.end_ns - s.begin_ns; }
  void OnGpuActivity(const pipetune::tracer::GpuActivity& a) override { sum_ += a.name.size(); }
  uint64_t sum_ = 0;
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view bytes(reinterpret_cast<const char*>(data), size);
  CheckingVisitor visitor;
  auto report = pipetune::tracer::ReadTraceFromMemory(bytes, visitor, "fuzz");
  if (report.ok()) {
    PIPETUNE_CHECK(report->bytes_read + report->bytes_not_read == size);
    PIPETUNE_CHECK(report->bytes_read <= size);
  }
  auto trace = pipetune::tracer::LoadTraceFromMemory(bytes, "fuzz");
  PIPETUNE_CHECK(trace.ok() == report.ok());
  std::ostringstream json;
  pipetune::tracer::ChromeExportOptions options;
  options.max_events = 1000;
  (void)pipetune::tracer::ExportChromeFromMemory(bytes, json, options);
  return 0;
}

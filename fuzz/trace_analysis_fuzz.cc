// libFuzzer target for what reads a trace after its framing: the analyzer.
// A trace is a file users share, and its content is untrusted past the
// reader's checks: the DataLoader record (JSON inside the pipeline info),
// the snapshots' counters, the spans' times. Any input the reader accepts
// must be profiled, diagnosed and rendered in every report format, or
// refused with a Status; never a crash, undefined behaviour, a leak or an
// allocation out of proportion to the input.
//
// Seeds: fuzz/corpus/trace_analysis (the golden DataLoader runs' main
// traces and two engine traces). trace_reader_fuzz covers the framing.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "pipetune/analyzer/collector.h"
#include "pipetune/analyzer/dataloader_model.h"
#include "pipetune/analyzer/dataloader_trace.h"
#include "pipetune/analyzer/diagnosis.h"
#include "pipetune/analyzer/report.h"
#include "pipetune/base/check.h"
#include "pipetune/tracer/reader.h"

namespace {

using namespace pipetune;

void RenderEvery(const analyzer::Diagnosis& d) {
  for (analyzer::ReportFormat format : {analyzer::ReportFormat::kText, analyzer::ReportFormat::kJson,
                                        analyzer::ReportFormat::kMarkdown, analyzer::ReportFormat::kHtml}) {
    PIPETUNE_CHECK(!analyzer::RenderReport(d, format).empty());
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view bytes(reinterpret_cast<const char*>(data), size);
  auto trace = tracer::LoadTraceFromMemory(bytes, "fuzz");
  if (!trace.ok()) return 0;
  analyzer::DiagnoseOptions options;
  if (analyzer::IsDataLoaderTrace(*trace)) {
    options.what_ifs = {"num_workers=2"};
    auto run = analyzer::MakeDataLoaderProfile(*trace, {});
    if (!run.ok()) {
      PIPETUNE_CHECK(!run.status().message().empty());
      return 0;
    }
    auto diagnosis = analyzer::DiagnoseDataLoader(*run, options);
    if (diagnosis.ok()) RenderEvery(*diagnosis);
    return 0;
  }
  analyzer::TraceCollector collector;
  auto report = tracer::ReadTraceFromMemory(bytes, collector, "fuzz");
  if (!report.ok()) return 0;
  analyzer::CollectedTrace collected = collector.Finish(*report);
  auto diagnosis = analyzer::Diagnose(collected, "fuzz", options, {});
  if (diagnosis.ok()) RenderEvery(*diagnosis);
  return 0;
}

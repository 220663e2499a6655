#include "pipetune/analyzer/gpu.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>

#include "pipetune/base/numbers.h"

namespace pipetune::analyzer {
namespace {

using Span = std::pair<uint64_t, uint64_t>;

// Sorted, disjoint union of spans clipped to [begin, end).
std::vector<Span> Union(std::vector<Span> spans, uint64_t begin, uint64_t end) {
  std::vector<Span> out;
  for (Span& s : spans) {
    s.first = std::max(s.first, begin);
    s.second = std::min(s.second, end);
  }
  std::erase_if(spans, [](const Span& s) { return s.second <= s.first; });
  std::sort(spans.begin(), spans.end());
  for (const Span& s : spans) {
    if (!out.empty() && s.first <= out.back().second) {
      out.back().second = std::max(out.back().second, s.second);
    } else {
      out.push_back(s);
    }
  }
  return out;
}

// Length of [a, b) covered by the sorted disjoint `spans`.
uint64_t Covered(const std::vector<Span>& spans, uint64_t a, uint64_t b) {
  uint64_t total = 0;
  auto it = std::lower_bound(spans.begin(), spans.end(), Span{a, 0},
                             [](const Span& x, const Span& y) { return x.second <= y.first; });
  for (; it != spans.end() && it->first < b; ++it) {
    uint64_t lo = std::max(a, it->first), hi = std::min(b, it->second);
    if (hi > lo) total += hi - lo;
  }
  return total;
}

}  // namespace

GpuAnalysis AnalyzeGpu(const GpuAnalysisInput& input) {
  GpuAnalysis out;
  out.inferred = !input.consumer_recorded;
  if (input.end_ns <= input.begin_ns) return out;
  const double window_s = static_cast<double>(input.end_ns - input.begin_ns) / 1e9;
  const std::vector<Span> waits = Union(input.consumer_waits, input.begin_ns, input.end_ns);

  std::map<uint32_t, std::vector<const GpuInterval*>> by_device;
  for (const GpuInterval& w : input.work) by_device[w.device].push_back(&w);
  for (auto& [device, work] : by_device) {
    std::vector<Span> spans;
    spans.reserve(work.size());
    for (const GpuInterval* w : work) spans.emplace_back(w->start_ns, w->end_ns);
    std::vector<Span> busy = Union(spans, input.begin_ns, input.end_ns);
    if (busy.empty()) continue;
    // Where each busy stretch starts with a host-to-device copy: the next
    // batch arriving (inference when no consumer is recorded).
    std::vector<uint64_t> input_arrivals;
    for (const GpuInterval* w : work) {
      if (w->host_to_device) input_arrivals.push_back(w->start_ns);
    }
    std::sort(input_arrivals.begin(), input_arrivals.end());

    GpuDeviceUsage usage;
    usage.device = device;
    uint64_t busy_ns = 0, idle_ns = 0, stall_ns = 0;
    uint64_t cursor = input.begin_ns;
    auto gap = [&](uint64_t a, uint64_t b, bool ended_by_busy) {
      if (b <= a) return;
      ++out.gaps;
      idle_ns += b - a;
      uint64_t stalled = 0;
      if (input.consumer_recorded) {
        stalled = Covered(waits, a, b);
      } else if (ended_by_busy && std::binary_search(input_arrivals.begin(), input_arrivals.end(), b)) {
        stalled = b - a;
      }
      if (stalled > 0) ++out.input_stall_gaps;
      stall_ns += stalled;
    };
    for (const Span& s : busy) {
      gap(cursor, s.first, true);
      busy_ns += s.second - s.first;
      cursor = s.second;
    }
    gap(cursor, input.end_ns, false);
    usage.busy_fraction = static_cast<double>(busy_ns) / 1e9 / window_s;
    usage.idle_seconds = static_cast<double>(idle_ns) / 1e9;
    usage.input_stall_seconds = static_cast<double>(stall_ns) / 1e9;
    out.idle_seconds += usage.idle_seconds;
    out.input_stall_seconds += usage.input_stall_seconds;
    out.devices.push_back(usage);
  }
  if (out.devices.empty()) return out;
  for (const GpuDeviceUsage& d : out.devices) out.busy_fraction += d.busy_fraction;
  out.busy_fraction /= static_cast<double>(out.devices.size());
  out.other_idle_seconds = out.idle_seconds - out.input_stall_seconds;
  out.input_stall_share = out.idle_seconds > 0 ? out.input_stall_seconds / out.idle_seconds : 0.0;
  if (out.busy_fraction >= kGpuBoundBusy) {
    out.verdict = GpuVerdict::kGpuBound;
  } else if (out.input_stall_share >= kInputStallShare) {
    out.verdict = GpuVerdict::kInputStalled;
  } else {
    out.verdict = GpuVerdict::kOtherIdle;
  }
  return out;
}

const char* GpuVerdictName(GpuVerdict verdict) {
  switch (verdict) {
    case GpuVerdict::kNoActivity:
      return "no_activity";
    case GpuVerdict::kGpuBound:
      return "gpu_bound";
    case GpuVerdict::kInputStalled:
      return "input_stalled";
    case GpuVerdict::kOtherIdle:
      return "other_idle";
  }
  return "no_activity";
}

std::string GpuVerdictSentence(const GpuAnalysis& a) {
  const double idle = 1.0 - a.busy_fraction;
  const std::string how = a.inferred ? " (inferred from host-to-device copies: no consumer recorded)" : "";
  switch (a.verdict) {
    case GpuVerdict::kNoActivity:
      return "no GPU work in the window";
    case GpuVerdict::kGpuBound:
      return fmt::format(
          "GPU-bound: the GPU is busy {} of the time; a faster input pipeline cannot speed "
          "training up (input stalls are {} of the idle time{})",
          Percent(a.busy_fraction), Percent(a.input_stall_share), how);
    case GpuVerdict::kInputStalled:
      return fmt::format(
          "input-stalled: the GPU idles {} of the time, {} of it waiting for input{}; tuning "
          "the input pipeline can help (up to {} busy)",
          Percent(idle), Percent(a.input_stall_share), how,
          Percent(std::min(1.0, a.busy_fraction + idle * a.input_stall_share)));
    case GpuVerdict::kOtherIdle:
      return fmt::format(
          "the GPU idles {} of the time, but only {} of that waiting for input{}: the rest is "
          "the program's own host work or synchronization; tuning the input pipeline helps little",
          Percent(idle), Percent(a.input_stall_share), how);
  }
  return {};
}

}  // namespace pipetune::analyzer

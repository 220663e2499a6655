// The timeline charts' points (timeline.h).
#include "timeline.h"

#include <algorithm>
#include <cmath>
#include <utility>

namespace pipetune::analyzer::internal {
namespace {

// The timeline charts show at most this many points.
constexpr size_t kMaxTimelinePoints = 240;
// ... each over enough time to hold this many outputs on average, while at
// least kMinTimelinePoints remain.
constexpr double kOutputsPerTimelinePoint = 8;
constexpr size_t kMinTimelinePoints = 20;

double Increase(uint64_t later, uint64_t earlier) {
  return static_cast<double>(later - std::min(later, earlier));
}

}  // namespace

std::vector<TimelinePoint> Timeline(const CollectedTrace& trace) {
  std::vector<TimelinePoint> points;
  const std::vector<Frame>& frames = trace.frames;
  if (frames.size() < 2) return points;
  size_t step = (frames.size() - 1 + kMaxTimelinePoints - 1) / kMaxTimelinePoints;
  bool has_consumer = frames.back().steps > 0;
  size_t last_stage = trace.stages.empty() ? 0 : trace.stages.size() - 1;
  // A slow output (a batch of 64 images, 8 a second) arrives in one snapshot
  // interval and not the next: per-snapshot rates would swing between 0 and
  // twice the mean. Each point spans enough snapshots to hold about
  // kOutputsPerTimelinePoint outputs on average, keeping at least
  // kMinTimelinePoints points.
  double total_outputs = has_consumer ? Increase(frames.back().steps, frames.front().steps)
                                      : Increase(CountersAt(frames.back(), last_stage).produced,
                                                 CountersAt(frames.front(), last_stage).produced);
  double per_frame = total_outputs / static_cast<double>(frames.size() - 1);
  if (per_frame > 0) {
    size_t wanted = static_cast<size_t>(std::ceil(kOutputsPerTimelinePoint / per_frame));
    size_t most = std::max<size_t>(1, (frames.size() - 1) / kMinTimelinePoints);
    step = std::max(step, std::min(wanted, most));
  }
  for (size_t i = step; i < frames.size(); i += step) {
    const Frame& a = frames[i - step];
    const Frame& b = frames[i];
    double dt = Increase(b.time_ns, a.time_ns) / 1e9;
    if (dt <= 0) continue;
    TimelinePoint point;
    point.seconds = static_cast<double>(b.time_ns) / 1e9;
    double outputs = has_consumer
                         ? Increase(b.steps, a.steps)
                         : Increase(CountersAt(b, last_stage).produced, CountersAt(a, last_stage).produced);
    point.throughput = outputs / dt;
    point.stall_fraction = std::min(1.0, Increase(b.step_wait_ns, a.step_wait_ns) / 1e9 / dt);
    point.cores_used = a.has_process ? Increase(b.process_cpu_ns, a.process_cpu_ns) / 1e9 / dt : 0.0;
    point.rss_bytes = static_cast<double>(b.rss_bytes);
    for (size_t s = 0; s < trace.stages.size(); ++s) {
      double workers = std::max<uint32_t>(1, CountersAt(b, s).parallelism);
      point.stage_busy.push_back(
          std::min(1.0, Increase(CountersAt(b, s).work_ns, CountersAt(a, s).work_ns) / 1e9 / (dt * workers)));
    }
    points.push_back(std::move(point));
  }
  return points;
}
}  // namespace pipetune::analyzer::internal

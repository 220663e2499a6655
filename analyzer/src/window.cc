// Choosing the steady window and measuring the counters over it.
#include "pipetune/analyzer/window.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>

namespace pipetune::analyzer {
namespace {

// Warm-up skipped: 10% of the run, and at least min(1 s, a quarter of it).
constexpr double kWarmupShare = 0.10;
constexpr double kWarmupSeconds = 1.0;
constexpr double kWarmupMaxShare = 0.25;
// After a cache's fill, at least this much of the run must remain to measure
// the replay; otherwise the fill itself is measured.
constexpr double kMinSteadySeconds = 0.5;
constexpr double kMinSteadyShare = 0.10;
// A scaling point needs this many elements at its parallelism level.
constexpr double kMinScalingElements = 20;
// A prediction is judged over at least this much of a run (JudgeWindow): a
// count stale by 100 ms at either end (a sampled recorder's) is then at
// most 5% of it, and so is one output more or less.
constexpr double kMinJudgedSeconds = 2.0;
constexpr double kMinJudgedOutputs = 20;

double Seconds(uint64_t ns) { return static_cast<double>(ns) / 1e9; }

// Stage index in the trace of the config's stage `config_index`.
std::optional<size_t> TraceIndex(const CollectedTrace& trace, const models::PipelineConfig* config,
                                 size_t config_index) {
  if (config == nullptr || config_index >= config->stages.size()) return std::nullopt;
  return trace.FindStage(config->stages[config_index].name);
}

// The index of the first frame at which stage `stage` had produced its final
// count, and whether it then stayed idle for at least `idle_seconds` before
// the end of the trace.
struct RanDry {
  size_t frame = 0;
  bool dry = false;
};
RanDry FindRanDry(const CollectedTrace& trace, size_t stage, double idle_seconds) {
  const std::vector<Frame>& frames = trace.frames;
  uint64_t final_count = CountersAt(frames.back(), stage).produced;
  size_t first = frames.size() - 1;
  while (first > 0 && CountersAt(frames[first - 1], stage).produced == final_count) --first;
  RanDry result;
  result.frame = first;
  result.dry = final_count > 0 && first + 2 < frames.size() &&
               Seconds(frames.back().time_ns - frames[first].time_ns) >= idle_seconds;
  return result;
}

// Where a cache's first epoch ended, when the trace shows it: the stage
// before the cache stopped producing while the run went on.
std::optional<size_t> CacheFillEnd(const CollectedTrace& trace, const models::PipelineConfig* config) {
  if (config == nullptr) return std::nullopt;
  for (size_t i = 1; i < config->stages.size(); ++i) {
    if (config->stages[i].op != models::Op::kCache) continue;
    std::optional<size_t> upstream = TraceIndex(trace, config, i - 1);
    if (!upstream) return std::nullopt;
    RanDry dry = FindRanDry(trace, *upstream, kMinSteadySeconds / 2);
    return dry.dry ? std::optional<size_t>(dry.frame) : std::nullopt;
  }
  return std::nullopt;
}

size_t FirstFrameAtOrAfter(const std::vector<Frame>& frames, double seconds) {
  for (size_t i = 0; i < frames.size(); ++i) {
    if (Seconds(frames[i].time_ns) >= seconds - 1e-9) return i;
  }
  return frames.size() - 1;
}

// The last frame at which the consumer had just taken outputs (steps grew);
// the last frame when there is no consumer.
size_t LastConsumingFrame(const std::vector<Frame>& frames) {
  if (frames.back().steps == 0) return frames.size() - 1;
  size_t last = frames.size() - 1;
  while (last > 0 && frames[last - 1].steps == frames.back().steps) --last;
  return last;
}

// The first frame at which any stage ran at its final parallelism for good.
std::optional<size_t> LastParallelismChange(const CollectedTrace& trace) {
  std::optional<size_t> last;
  for (size_t i = 1; i < trace.frames.size(); ++i) {
    for (size_t s = 0; s < trace.stages.size(); ++s) {
      const StageCounters& a = CountersAt(trace.frames[i - 1], s);
      const StageCounters& b = CountersAt(trace.frames[i], s);
      if (a.seen && b.seen && a.parallelism != b.parallelism) last = i;
    }
  }
  return last;
}

bool HasCacheStage(const models::PipelineConfig* config) {
  if (config == nullptr) return false;
  return std::any_of(config->stages.begin(), config->stages.end(),
                     [](const models::StageConfig& s) { return s.op == models::Op::kCache; });
}

}  // namespace

PredictionJudgement JudgeWindow(double seconds, double outputs) {
  PredictionJudgement judgement;
  if (seconds >= kMinJudgedSeconds && outputs >= kMinJudgedOutputs) return judgement;
  judgement.judged = false;
  judgement.why = fmt::format(
      "too short to judge the prediction ({:.2f} s, {:.0f} outputs; it is judged over at least {:.0f} s and "
      "{:.0f} outputs: run for longer)",
      seconds, outputs, kMinJudgedSeconds, kMinJudgedOutputs);
  return judgement;
}

StatusOr<Window> SelectWindow(const CollectedTrace& trace, const models::PipelineConfig* config) {
  const std::vector<Frame>& frames = trace.frames;
  if (frames.size() < 2) {
    return InvalidInput(fmt::format(
        "{}: the trace holds {} snapshot(s): too short to measure rates (run for longer than the snapshot "
        "interval, {} ms)",
        trace.read_report.path, frames.size(), trace.header.snapshot_interval_ms));
  }
  double duration = Seconds(frames.back().time_ns);
  double warmup = std::max(kWarmupShare * duration, std::min(kWarmupSeconds, kWarmupMaxShare * duration));
  double start = warmup;
  std::string start_reason = fmt::format("warm-up skipped: {:.2f} s", warmup);
  std::optional<double> first_step;
  if (trace.first_step_start_ns) {
    first_step = Seconds(*trace.first_step_start_ns);
  } else if (frames.back().steps > 0) {
    for (const Frame& frame : frames) {
      if (frame.steps > 0) {
        first_step = Seconds(frame.time_ns);
        break;
      }
    }
  }
  if (first_step && *first_step > start) {
    start = *first_step;
    start_reason = fmt::format("the consumer's first step came at {:.2f} s", *first_step);
  }

  Window window;
  size_t end_frame = LastConsumingFrame(frames);
  std::string end_reason =
      end_frame + 1 == frames.size() ? "the end of the trace" : "the consumer's last step";
  if (HasCacheStage(config)) {
    std::optional<size_t> fill_end = CacheFillEnd(trace, config);
    double steady = fill_end ? Seconds(frames[end_frame].time_ns - frames[*fill_end].time_ns) : 0.0;
    if (fill_end && steady >= std::max(kMinSteadySeconds, kMinSteadyShare * duration)) {
      double fill_seconds = Seconds(frames[*fill_end].time_ns);
      if (fill_seconds > start) {
        start = fill_seconds;
        start_reason = fmt::format("the cache's first epoch was stored by {:.2f} s", fill_seconds);
      }
      window.cache_filled = true;
    } else if (fill_end) {
      // The frame before the fill ended: in the one after, replays may have begun.
      end_frame = std::min(end_frame, *fill_end > 0 ? *fill_end - 1 : 0);
      end_reason =
          "the end of the cache's first epoch (too little of the run after it to measure the replay)";
    } else {
      end_reason += " (the cache was still storing its first epoch)";
    }
  }
  // A parallelism change inside the window would mix two configurations:
  // measure the last one (the earlier ones still give scaling points).
  if (std::optional<size_t> change = LastParallelismChange(trace)) {
    double at = Seconds(frames[*change].time_ns);
    double remaining = Seconds(frames[end_frame].time_ns) - at;
    if (at > start && remaining >= std::max(kMinSteadySeconds, kMinSteadyShare * duration)) {
      start = at;
      start_reason = fmt::format("a stage's parallelism last changed at {:.2f} s", at);
    }
  }
  window.begin_frame = FirstFrameAtOrAfter(frames, start);
  window.end_frame = end_frame;
  if (window.end_frame <= window.begin_frame) {
    // Too short for the rules: measure what there is.
    window.begin_frame = 0;
    window.end_frame = frames.size() - 1;
    start_reason = "the run was too short to skip a warm-up; the whole run is measured";
    window.cache_filled = false;
  }
  window.begin_seconds = Seconds(frames[window.begin_frame].time_ns);
  window.end_seconds = Seconds(frames[window.end_frame].time_ns);
  window.reason = fmt::format("{:.2f} s to {:.2f} s: {}; until {}", window.begin_seconds, window.end_seconds,
                              start_reason, end_reason);
  return window;
}

namespace {

models::StageMeasurement MeasureStage(const CollectedTrace& trace, size_t index, const Frame& begin,
                                      const Frame& end, double seconds) {
  const StageCounters& a = CountersAt(begin, index);
  const StageCounters& b = CountersAt(end, index);
  auto delta = [](uint64_t later, uint64_t earlier) {
    return static_cast<double>(later >= earlier ? later - earlier : 0);
  };
  models::StageMeasurement m;
  m.name = trace.stages[index].def.name;
  m.op = trace.stages[index].def.op;
  m.parallelism =
      static_cast<int>(std::max<uint32_t>(1, b.seen ? b.parallelism : trace.stages[index].def.parallelism));
  m.elements = delta(b.produced, a.produced);
  m.consumed = delta(b.consumed, a.consumed);
  m.bytes = delta(b.bytes_produced, a.bytes_produced);
  m.cpu_seconds = delta(b.cpu_ns, a.cpu_ns) / 1e9;
  m.work_seconds = delta(b.work_ns, a.work_ns) / 1e9;
  m.wait_input_seconds = delta(b.wait_input_ns, a.wait_input_ns) / 1e9;
  m.wait_output_seconds = delta(b.wait_output_ns, a.wait_output_ns) / 1e9;
  m.mean_buffer_bytes = seconds > 0 ? (b.occupancy_byte_seconds - a.occupancy_byte_seconds) / seconds : 0.0;
  return m;
}

// Stretches of the measured part of the trace where a stage ran at another
// parallelism than at the window's end: one scaling point per level.
std::vector<models::ScalingPoint> ScalingPoints(const CollectedTrace& trace, size_t stage, size_t from_frame,
                                                uint32_t window_parallelism) {
  struct Sums {
    double elements = 0, busy_seconds = 0;
  };
  std::map<uint32_t, Sums> levels;
  for (size_t i = from_frame + 1; i < trace.frames.size(); ++i) {
    const StageCounters& a = CountersAt(trace.frames[i - 1], stage);
    const StageCounters& b = CountersAt(trace.frames[i], stage);
    if (!a.seen || !b.seen || a.parallelism != b.parallelism || b.parallelism == window_parallelism) continue;
    Sums& sums = levels[b.parallelism];
    sums.elements += static_cast<double>(b.produced - std::min(b.produced, a.produced));
    sums.busy_seconds += static_cast<double>(std::max(b.work_ns - std::min(b.work_ns, a.work_ns),
                                                      b.cpu_ns - std::min(b.cpu_ns, a.cpu_ns))) /
                         1e9;
  }
  std::vector<models::ScalingPoint> points;
  for (const auto& [parallelism, sums] : levels) {
    if (sums.elements < kMinScalingElements || sums.busy_seconds <= 0) continue;
    double latency = sums.busy_seconds / sums.elements;
    points.push_back({static_cast<double>(parallelism), parallelism / latency});
  }
  return points;
}

// Elements per epoch at the source: what the source said one pass holds (a
// listing, a counted range), else, when the trace shows the source ran dry,
// its count divided by the passes a counted repeat asked of it.
std::optional<double> SourceEpoch(const CollectedTrace& trace, const models::PipelineConfig* config) {
  if (trace.stages.empty()) return std::nullopt;
  if (uint64_t known = trace.frames.empty() ? 0 : CountersAt(trace.frames.back(), 0).epoch_elements;
      known > 0) {
    return static_cast<double>(known);
  }
  RanDry dry = FindRanDry(trace, 0, kMinSteadySeconds);
  if (!dry.dry) return std::nullopt;
  double produced = static_cast<double>(CountersAt(trace.frames.back(), 0).produced);
  if (config == nullptr) return produced;
  for (size_t i = 1; i < config->stages.size(); ++i) {
    const models::StageConfig& stage = config->stages[i];
    if (stage.op == models::Op::kCache) return produced;     // it replays; the source ran once
    if (stage.op == models::Op::kTake) return std::nullopt;  // cut short: not an epoch
    if (stage.op == models::Op::kRepeat) {
      StatusOr<std::optional<int64_t>> count = models::ArgInt(stage, "count", 1);
      if (!count.ok() || !*count) return std::nullopt;
      return produced / static_cast<double>(**count);
    }
  }
  return produced;
}

}  // namespace

models::WindowMeasurement MeasureWindow(const CollectedTrace& trace, const Window& window,
                                        const models::PipelineConfig* config) {
  const Frame& begin = trace.frames[window.begin_frame];
  const Frame& end = trace.frames[window.end_frame];
  double seconds = window.end_seconds - window.begin_seconds;
  models::WindowMeasurement m;
  m.pipeline_name = trace.pipeline.name;
  m.begin_seconds = window.begin_seconds;
  m.end_seconds = window.end_seconds;
  m.window_reason = window.reason;
  for (size_t i = 0; i < trace.stages.size(); ++i) {
    models::StageMeasurement stage = MeasureStage(trace, i, begin, end, seconds);
    stage.scaling_points =
        ScalingPoints(trace, i, window.begin_frame, static_cast<uint32_t>(stage.parallelism));
    m.stages.push_back(std::move(stage));
  }
  bool has_consumer = trace.frames.back().steps > 0;
  if (has_consumer) {
    m.outputs = static_cast<double>(end.steps - begin.steps);
    m.consumer_wait_seconds = static_cast<double>(end.step_wait_ns - begin.step_wait_ns) / 1e9;
    m.consumer_step_seconds = static_cast<double>(end.step_busy_ns - begin.step_busy_ns) / 1e9;
  } else if (!m.stages.empty()) {
    m.outputs = m.stages.back().elements;  // no consumer recorded: the last stage's outputs
  }
  if (begin.has_process && end.has_process) {
    m.process_cpu_seconds =
        static_cast<double>(end.process_cpu_ns - std::min(end.process_cpu_ns, begin.process_cpu_ns)) / 1e9;
  }
  if (begin.read_bytes >= 0 && end.read_bytes >= begin.read_bytes) {
    m.storage_bytes_read = static_cast<double>(end.read_bytes - begin.read_bytes);
  }
  m.host_cores = trace.header.host.UsableCores();
  m.cache_filled = window.cache_filled;
  m.source_elements_per_epoch = SourceEpoch(trace, config);
  return m;
}

}  // namespace pipetune::analyzer

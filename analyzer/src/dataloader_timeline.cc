// A DataLoader run's processes merged into one collected timeline
// (dataloader_timeline.h).
#include "dataloader_timeline.h"

#include <algorithm>
#include <functional>
#include <memory>
#include <queue>
#include <utility>

namespace pipetune::analyzer::internal {
namespace {

// What to add to a time of `other`'s clock to read it on `main`'s: nothing
// on one host's CLOCK_MONOTONIC (every worker's case), else the difference
// of the two sessions' starts on the wall clock.
int64_t ClockShift(const tracer::TraceHeader& main, const tracer::TraceHeader& other) {
  if (other.host.hostname == main.host.hostname && other.clock.clock_id == main.clock.clock_id) return 0;
  int64_t main_offset = static_cast<int64_t>(main.clock.start_ns) - main.clock.start_unix_ns;
  int64_t other_offset = static_cast<int64_t>(other.clock.start_ns) - other.clock.start_unix_ns;
  return main_offset - other_offset;
}

// One process's cumulative readings of one thing, in time order on the main
// clock, read forward: the latest at or before a time.
template <typename Record>
class Readings {
 public:
  Readings(std::vector<const Record*> records, int64_t shift) : records_(std::move(records)), shift_(shift) {
    std::stable_sort(records_.begin(), records_.end(),
                     [](const Record* a, const Record* b) { return a->time_ns < b->time_ns; });
  }

  // Times must not decrease from one call to the next.
  const Record* LatestAt(int64_t time_ns) {
    while (next_ < records_.size() && Time(*records_[next_]) <= time_ns) ++next_;
    return next_ > 0 ? records_[next_ - 1] : nullptr;
  }
  bool EndedBefore(int64_t time_ns) const { return records_.empty() || Time(*records_.back()) < time_ns; }

 private:
  int64_t Time(const Record& r) const { return static_cast<int64_t>(r.time_ns) + shift_; }

  std::vector<const Record*> records_;
  int64_t shift_ = 0;
  size_t next_ = 0;
};

using ProcessReadings = Readings<tracer::ProcessSample>;

// A stage's recorded calls (its sampled spans) on the main clock: how much
// of the calls running at a time has passed by then. A call's time reaches
// the stage's counters when it returns, so a long call (the first `next()`
// waiting seconds for spawned workers) would land whole in the snapshot
// interval where it ended; with this it is spread over the ones it covered.
class CallsInFlight {
 public:
  explicit CallsInFlight(std::vector<std::pair<int64_t, int64_t>> calls) : calls_(std::move(calls)) {
    std::sort(calls_.begin(), calls_.end());
  }

  // Nanoseconds, up to `time_ns`, of the calls begun before it and not yet
  // ended. Times must not decrease from one call to the next.
  uint64_t ElapsedAt(int64_t time_ns) {
    while (next_ < calls_.size() && calls_[next_].first < time_ns) {
      running_.push({calls_[next_].second, calls_[next_].first});
      begins_ns_ += calls_[next_].first;
      ++next_;
    }
    while (!running_.empty() && running_.top().first <= time_ns) {
      begins_ns_ -= running_.top().second;
      running_.pop();
    }
    return static_cast<uint64_t>(static_cast<int64_t>(running_.size()) * time_ns - begins_ns_);
  }

 private:
  std::vector<std::pair<int64_t, int64_t>> calls_;  // (begin, end), by begin
  size_t next_ = 0;
  // (end, begin) of the calls begun and not yet ended, the earliest end on top.
  std::priority_queue<std::pair<int64_t, int64_t>, std::vector<std::pair<int64_t, int64_t>>, std::greater<>>
      running_;
  int64_t begins_ns_ = 0;  // the sum of their begins
};

// One process's stage: its counts at a time, with its calls in flight.
struct StageSource {
  Readings<tracer::StageSnapshot> snapshots;
  CallsInFlight calls;

  // The latest snapshot at or before `time_ns` with the time of the calls
  // running then added to its work; false when there is neither yet. (A
  // stage the recorder makes at its first call's end has no snapshot while
  // that call runs.)
  bool At(int64_t time_ns, tracer::StageSnapshot& counts) {
    const tracer::StageSnapshot* latest = snapshots.LatestAt(time_ns);
    counts = latest != nullptr ? *latest : tracer::StageSnapshot{};
    uint64_t running = calls.ElapsedAt(time_ns);
    counts.work_ns += running;
    return latest != nullptr || running > 0;
  }
};

// `trace`'s stage named `name`, on the main clock; null when it has none.
std::unique_ptr<StageSource> StageOf(const tracer::Trace& trace, const std::string& name, int64_t shift) {
  std::vector<tracer::StageId> ids;
  for (const tracer::StageDef& def : trace.stages) {
    if (def.name == name) ids.push_back(def.id);
  }
  if (ids.empty()) return nullptr;
  auto ours = [&](tracer::StageId id) { return std::find(ids.begin(), ids.end(), id) != ids.end(); };
  std::vector<const tracer::StageSnapshot*> snapshots;
  for (const tracer::StageSnapshot& s : trace.snapshots) {
    if (ours(s.stage)) snapshots.push_back(&s);
  }
  std::vector<std::pair<int64_t, int64_t>> calls;
  for (const tracer::SpanRecord& span : trace.spans) {
    if (!ours(span.stage) || span.end_ns <= span.begin_ns) continue;
    calls.emplace_back(static_cast<int64_t>(span.begin_ns) + shift,
                       static_cast<int64_t>(span.end_ns) + shift);
  }
  return std::make_unique<StageSource>(StageSource{
      Readings<tracer::StageSnapshot>(std::move(snapshots), shift), CallsInFlight(std::move(calls))});
}

ProcessReadings ProcessOf(const tracer::Trace& trace, int64_t shift) {
  std::vector<const tracer::ProcessSample*> samples;
  for (const tracer::ProcessSample& s : trace.process_samples) samples.push_back(&s);
  return ProcessReadings(std::move(samples), shift);
}

// The main process's ticks: the times of its snapshots and process samples.
std::vector<uint64_t> Ticks(const tracer::Trace& main) {
  std::vector<uint64_t> ticks;
  for (const tracer::StageSnapshot& s : main.snapshots) ticks.push_back(s.time_ns);
  for (const tracer::ProcessSample& s : main.process_samples) ticks.push_back(s.time_ns);
  std::sort(ticks.begin(), ticks.end());
  ticks.erase(std::unique(ticks.begin(), ticks.end()), ticks.end());
  return ticks;
}

void AddCounts(const tracer::StageSnapshot& from, tracer::StageSnapshot& to) {
  to.produced += from.produced;
  to.consumed += from.consumed;
  to.bytes_produced += from.bytes_produced;
  to.work_ns += from.work_ns;
  to.wait_input_ns += from.wait_input_ns;
  to.wait_output_ns += from.wait_output_ns;
  to.cpu_ns += from.cpu_ns;
  to.occupancy_elements += from.occupancy_elements;
  to.occupancy_bytes += from.occupancy_bytes;
  to.spans_recorded += from.spans_recorded;
  to.spans_dropped += from.spans_dropped;
}

}  // namespace

CollectedTrace MergeDataLoaderTimeline(const tracer::Trace& main, const std::string& prefix,
                                       const std::vector<const tracer::Trace*>& workers,
                                       const std::vector<DataLoaderTimelineStage>& stages) {
  std::vector<int64_t> shifts;
  shifts.reserve(workers.size());
  for (const tracer::Trace* w : workers) shifts.push_back(ClockShift(main.header, w->header));

  // Per stage, every process's readings of it.
  std::vector<std::vector<std::unique_ptr<StageSource>>> sources(stages.size());
  for (size_t s = 0; s < stages.size(); ++s) {
    if (auto r = StageOf(main, prefix + stages[s].name, 0)) sources[s].push_back(std::move(r));
    for (size_t w = 0; w < workers.size(); ++w) {
      if (auto r = StageOf(*workers[w], stages[s].name, shifts[w])) sources[s].push_back(std::move(r));
    }
  }
  std::unique_ptr<StageSource> next = StageOf(main, prefix + "next", 0);
  std::unique_ptr<StageSource> step = StageOf(main, prefix + "step", 0);
  std::vector<ProcessReadings> processes{ProcessOf(main, 0)};
  for (size_t w = 0; w < workers.size(); ++w) processes.push_back(ProcessOf(*workers[w], shifts[w]));

  TraceCollector collector;
  collector.OnHeader(main.header);
  for (size_t s = 0; s < stages.size(); ++s) {
    tracer::StageDef def;
    def.id = static_cast<tracer::StageId>(s);
    def.name = stages[s].name;
    def.op = "dataloader";
    def.parallelism = stages[s].parallelism;
    collector.OnStage(def);
  }
  for (uint64_t tick : Ticks(main)) {
    const auto now = static_cast<int64_t>(tick);
    for (size_t s = 0; s < stages.size(); ++s) {
      tracer::StageSnapshot sum, counts;
      bool seen = false;
      for (const auto& source : sources[s]) {
        if (!source->At(now, counts)) continue;
        AddCounts(counts, sum);
        seen = true;
      }
      if (!seen) continue;
      sum.time_ns = tick;
      sum.stage = static_cast<tracer::StageId>(s);
      sum.parallelism = stages[s].parallelism;
      collector.OnSnapshot(sum);
    }
    tracer::ConsumerTotals consumer;
    consumer.time_ns = tick;
    tracer::StageSnapshot counts;
    if (next && next->At(now, counts)) {
      consumer.steps = counts.produced;
      consumer.wait_ns = counts.work_ns;
    }
    if (step && step->At(now, counts)) consumer.step_ns = counts.work_ns;
    collector.OnConsumerTotals(consumer);
    tracer::ProcessSample process;
    process.time_ns = tick;
    process.read_bytes = 0;
    for (ProcessReadings& p : processes) {
      const tracer::ProcessSample* latest = p.LatestAt(now);
      if (latest == nullptr) continue;
      process.cpu_ns += latest->cpu_ns;
      if (!p.EndedBefore(now)) process.rss_bytes += latest->rss_bytes;
      process.read_bytes =
          latest->read_bytes < 0 || process.read_bytes < 0 ? -1 : process.read_bytes + latest->read_bytes;
    }
    collector.OnProcessSample(process);
  }
  return collector.Finish(main.report);
}

}  // namespace pipetune::analyzer::internal

// A DataLoader run's processes merged into one collected timeline
// (dataloader_timeline.h).
#include "dataloader_timeline.h"

#include <algorithm>
#include <memory>
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

using StageReadings = Readings<tracer::StageSnapshot>;
using ProcessReadings = Readings<tracer::ProcessSample>;

// The snapshots of `trace`'s stage named `name`, as readings on the main clock.
std::unique_ptr<StageReadings> StageOf(const tracer::Trace& trace, const std::string& name, int64_t shift) {
  std::vector<tracer::StageId> ids;
  for (const tracer::StageDef& def : trace.stages) {
    if (def.name == name) ids.push_back(def.id);
  }
  if (ids.empty()) return nullptr;
  std::vector<const tracer::StageSnapshot*> snapshots;
  for (const tracer::StageSnapshot& s : trace.snapshots) {
    if (std::find(ids.begin(), ids.end(), s.stage) != ids.end()) snapshots.push_back(&s);
  }
  return std::make_unique<StageReadings>(std::move(snapshots), shift);
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
  std::vector<std::vector<std::unique_ptr<StageReadings>>> sources(stages.size());
  for (size_t s = 0; s < stages.size(); ++s) {
    if (auto r = StageOf(main, prefix + stages[s].name, 0)) sources[s].push_back(std::move(r));
    for (size_t w = 0; w < workers.size(); ++w) {
      if (auto r = StageOf(*workers[w], stages[s].name, shifts[w])) sources[s].push_back(std::move(r));
    }
  }
  std::unique_ptr<StageReadings> next = StageOf(main, prefix + "next", 0);
  std::unique_ptr<StageReadings> step = StageOf(main, prefix + "step", 0);
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
      tracer::StageSnapshot sum;
      bool seen = false;
      for (const auto& source : sources[s]) {
        if (const tracer::StageSnapshot* latest = source->LatestAt(now)) {
          AddCounts(*latest, sum);
          seen = true;
        }
      }
      if (!seen) continue;
      sum.time_ns = tick;
      sum.stage = static_cast<tracer::StageId>(s);
      sum.parallelism = stages[s].parallelism;
      collector.OnSnapshot(sum);
    }
    tracer::ConsumerTotals consumer;
    consumer.time_ns = tick;
    if (const tracer::StageSnapshot* n = next ? next->LatestAt(now) : nullptr) {
      consumer.steps = n->produced;
      consumer.wait_ns = n->work_ns;
    }
    if (const tracer::StageSnapshot* s = step ? step->LatestAt(now) : nullptr) consumer.step_ns = s->work_ns;
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

// A DataLoader run's section of every report (dataloader_report.h): moved
// here from the writers, which render it as they render any kind's.
#include "dataloader_report.h"

#include <fmt/format.h>

#include "format_util.h"

namespace pipetune::analyzer::internal {
namespace {

// How long a run must be before the DataLoader's prediction is its steady
// rate; empty when nothing is paid per epoch.
std::string RunLengthText(const DataLoaderSection& dl) {
  if (dl.steady_from_batches <= 0 || dl.epoch_batches <= 0) return "";
  std::string of_loader;
  if (dl.settings.batches_per_epoch &&
      static_cast<double>(*dl.settings.batches_per_epoch) > dl.epoch_batches + 0.5)
    of_loader = fmt::format(" (of the loader's {})", *dl.settings.batches_per_epoch);
  return fmt::format(
      "predicted for epochs of {:.0f} batches as this run took them{}, start-up, fill and drain included; "
      "the steady {} batches/s holds within 5% from epochs of {:.0f} batches",
      dl.epoch_batches, of_loader, Rate(dl.steady_throughput), dl.steady_from_batches);
}

std::string SettingsText(const DataLoaderSettings& s) {
  auto flag = [](bool b) { return b ? "True" : "False"; };
  std::string text = fmt::format("{}batch_size={} num_workers={}", s.iterable ? "IterableDataset, " : "",
                                 s.batch_size, s.num_workers);
  if (s.num_workers > 0) text += fmt::format(" prefetch_factor={}", s.prefetch_factor);
  if (s.fetch_threads > 1) text += fmt::format(" fetch_threads={}", s.fetch_threads);
  text += fmt::format(" persistent_workers={} pin_memory={}", flag(s.persistent_workers), flag(s.pin_memory));
  if (!s.sampler.empty()) text += " sampler=" + s.sampler;
  if (!s.dataset.empty()) text += " dataset=" + s.dataset;
  if (!s.start_method.empty()) text += " start_method=" + s.start_method;
  if (s.shards) text += fmt::format(" shards={}", *s.shards);
  return text;
}

// The whole process as `time` counts it, beside the cpu line's window: a
// step on the CPU whose run is mostly its start (the interpreter, torch's
// import) reads lower here than there; empty where the trace does not say.
std::string ProcessText(const DataLoaderSection& dl) {
  if (!dl.process_seconds || !dl.process_cpu_seconds || *dl.process_seconds <= 0) return "";
  return fmt::format(
      "{} cores over {:.1f} s from its start to its end, as `time` counts it ({:.1f} CPU-seconds, the "
      "interpreter's start, the imports and the workers that ended included; the cpu line is the loop's)",
      Cores(*dl.process_cpu_seconds / *dl.process_seconds), *dl.process_seconds, *dl.process_cpu_seconds);
}

// The GIL probe's reading: how much of each sample's CPU held the GIL, and
// whether the model took it (empty without probe figures: older traces read
// as before).
std::string GilText(const DataLoaderSection& dl) {
  if (!dl.gil) return "";
  const DataLoaderSection::Gil& g = *dl.gil;
  return fmt::format(
      "the sample fetches held Python's GIL {:.0f}% of their time: {:.2f} ms of each sample's {:.2f} ms CPU "
      "(probe, {} wakes, its own CPU {:.3f} s){}",
      g.held_share * 100, g.gil_seconds_per_sample * 1e3, g.cpu_seconds_per_sample * 1e3, g.probe.wakes,
      g.probe.cpu_seconds,
      !g.used ? "; too few wakes to go on: all of the CPU is counted as holding it"
      : g.priced_seconds_per_sample > g.gil_seconds_per_sample * 1.001
          ? "; priced as all of the CPU: the fetch waits on storage, and a round of reads from many threads "
            "queues for about all of it"
          : "");
}

Json GilJson(const DataLoaderSection::Gil& g) {
  return Json{{"wakes", g.probe.wakes},
              {"gil_late", g.probe.gil_late},
              {"window_seconds", Number(g.probe.seconds)},
              {"samples", g.probe.samples},
              {"probe_cpu_seconds", Number(g.probe.cpu_seconds)},
              {"held_share", Number(g.held_share)},
              {"cpu_seconds_per_sample", Number(g.cpu_seconds_per_sample)},
              {"gil_seconds_per_sample", Number(g.gil_seconds_per_sample)},
              {"measured", g.used},
              {"priced_seconds_per_sample", Number(g.priced_seconds_per_sample)}};
}

// A DataLoader run's settings and what the model took from it (only in its
// reports: a config's report stays as it was).
Json DataLoaderJson(const DataLoaderSection& dl) {
  const DataLoaderSettings& s = dl.settings;
  auto optional_int = [](const std::optional<int64_t>& v) { return v ? Json(*v) : Json(nullptr); };
  Json settings{{"batch_size", s.batch_size},
                {"num_workers", s.num_workers},
                {"prefetch_factor", s.num_workers > 0 ? Json(s.prefetch_factor) : Json(nullptr)},
                {"fetch_threads", s.fetch_threads},
                {"persistent_workers", s.persistent_workers},
                {"pin_memory", s.pin_memory},
                {"sampler", s.sampler},
                {"dataset", s.dataset},
                {"iterable", s.iterable},
                {"start_method", s.start_method.empty() ? Json(nullptr) : Json(s.start_method)},
                {"dataset_length", optional_int(s.dataset_length)},
                {"batches_per_epoch", optional_int(s.batches_per_epoch)},
                {"shards", optional_int(s.shards)}};
  Json epochs = Json::array();
  for (const DataLoaderSection::Epoch& e : dl.epochs) {
    epochs.push_back(Json{{"batches", e.batches},
                          {"workers_started", e.workers_started},
                          {"startup_seconds", Number(e.startup_seconds)}});
  }
  Json json{{"settings", settings},
            {"batches", dl.batches},
            {"steps", dl.steps},
            {"sharded_workers", dl.sharded_workers},
            {"rank", dl.rank ? Json(*dl.rank) : Json(nullptr)},
            {"local_rank", dl.local_rank ? Json(*dl.local_rank) : Json(nullptr)},
            {"world_size", dl.world_size ? Json(*dl.world_size) : Json(nullptr)},
            {"host", dl.host},
            {"epochs", epochs},
            {"main_rss_bytes", Number(dl.main_rss_bytes)},
            {"worker_rss_bytes", Number(dl.worker_rss_bytes)},
            {"worker_traces", dl.worker_traces},
            {"startup_seconds_per_epoch", Number(dl.startup_seconds_per_epoch)},
            {"epoch_end_seconds", Number(dl.epoch_end_seconds)},
            {"epoch_batches", Number(dl.epoch_batches)},
            {"steady_throughput", Number(dl.steady_throughput)},
            {"steady_from_batches", Number(dl.steady_from_batches)},
            {"process", dl.process_seconds && dl.process_cpu_seconds
                            ? Json{{"seconds", Number(*dl.process_seconds)},
                                   {"cpu_seconds", Number(*dl.process_cpu_seconds)}}
                            : Json(nullptr)},
            {"notes", dl.notes}};
  if (dl.gil) json["gil"] = GilJson(*dl.gil);  // only where measured: older traces' reports stay as they were
  return json;
}

}  // namespace

KindReport DataLoaderKindReport(const DataLoaderSection& dl) {
  KindReport report;
  report.headline.emplace_back("DataLoader", SettingsText(dl.settings));
  report.headline.emplace_back(
      "batches",
      fmt::format("{} over {} epoch{}, {} worker trace{}; worker start-up {:.3f} s "
                  "per epoch, its fill and drain {:.3f} s",
                  dl.batches, dl.epochs.size(), dl.epochs.size() == 1 ? "" : "s", dl.worker_traces,
                  dl.worker_traces == 1 ? "" : "s", dl.startup_seconds_per_epoch, dl.epoch_end_seconds));
  if (std::string run_length = RunLengthText(dl); !run_length.empty())
    report.headline.emplace_back("run length", run_length);
  if (std::string process = ProcessText(dl); !process.empty())
    report.headline.emplace_back("process", process);
  if (std::string gil = GilText(dl); !gil.empty()) report.headline.emplace_back("GIL", gil);
  for (const std::string& note : dl.notes) report.headline.emplace_back("note", note);
  report.json.emplace_back("dataloader", DataLoaderJson(dl));
  return report;
}

}  // namespace pipetune::analyzer::internal

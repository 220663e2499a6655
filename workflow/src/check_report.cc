// The CI gate's report in its four renderings (check.h).
#include <fmt/format.h>

#include <cmath>

#include "pipetune/base/text.h"
#include "pipetune/workflow/check.h"

namespace pipetune::workflow {
namespace {

Json Finite(double v) { return std::isfinite(v) ? Json(v) : Json(nullptr); }

Json ShiftJson(const Shift& s) {
  Json j{
      {"baseline", Finite(s.baseline_median)}, {"now", Finite(s.new_median)}, {"change", Finite(s.change)}};
  if (s.has_interval) {
    j["interval"] = Json{{"low", Finite(s.low)}, {"high", Finite(s.high)}, {"confidence", s.confidence}};
  }
  j["runs"] = Json{{"baseline", s.baseline_runs}, {"now", s.new_runs}};
  return j;
}

std::string PercentChange(double change) { return fmt::format("{:+.1f}%", change * 100); }

std::string Headline(const CheckReport& r) {
  switch (r.verdict) {
    case Verdict::kPass:
      return fmt::format("PASS: no regression beyond {:.0f}%", r.tolerance * 100);
    case Verdict::kMachine:
      if (r.machine_busy)
        return fmt::format(
            "MACHINE: throughput {} with every stage's CPU per element steady, and the CPU-bound "
            "stages waited {} longer for a core: this machine is busier than the baseline's",
            PercentChange(r.throughput.change), PercentChange(r.contention.change));
      return fmt::format(
          "MACHINE: every stage's CPU per element moved by about {} : this machine is slower or "
          "busier than the baseline's; no stage is blamed",
          PercentChange(r.machine_factor - 1));
    case Verdict::kRegression:
      break;
  }
  std::vector<std::string> what;
  for (const StageCheck& s : r.stages) {
    if (s.regressed)
      what.push_back(
          fmt::format("stage {} costs {} CPU per element", s.name, PercentChange(s.cpu_per_element.change)));
  }
  if (r.throughput_regressed)
    what.push_back(fmt::format("throughput {}", PercentChange(r.throughput.change)));
  if (r.config_regressed)
    what.push_back(fmt::format("config change predicts {} throughput", PercentChange(r.predicted_change)));
  std::string joined;
  for (const std::string& w : what) joined += (joined.empty() ? "" : "; ") + w;
  return "REGRESSION: " + joined;
}

std::string ThroughputLine(const CheckReport& r) {
  const Shift& t = r.throughput;
  // The medians of each side, and the shift estimated over every pair of runs
  // (gate_stats.h), which the verdict uses; with few noisy runs they differ.
  std::string line = fmt::format("throughput median {:.1f} -> {:.1f} outputs/s, shift {}", t.baseline_median,
                                 t.new_median, PercentChange(t.change));
  if (t.has_interval) line += fmt::format(", interval {}..{}", PercentChange(t.low), PercentChange(t.high));
  return line;
}

std::string BindsLine(const CheckReport& r) {
  if (!r.timed) return "";
  return fmt::format("binds now: {}{}", r.bottleneck.value_or("none (the consumer)"),
                     r.why.empty() ? "" : " - " + r.why);
}

std::string KnobLine(const KnobChange& k) {
  return fmt::format("{}.{}: {} -> {}{}", k.stage, k.knob, k.baseline, k.now,
                     k.predicted_change
                         ? fmt::format(" (model: {} throughput)", PercentChange(*k.predicted_change))
                         : " (not priced by the model)");
}

}  // namespace

Json CheckReportToJson(const CheckReport& r) {
  Json stages = Json::array();
  for (const StageCheck& s : r.stages) {
    stages.push_back(Json{{"name", s.name},
                          {"cpu_per_element", ShiftJson(s.cpu_per_element)},
                          {"judged", s.judged},
                          {"regressed", s.regressed},
                          {"why", s.why}});
  }
  Json knobs = Json::array();
  for (const KnobChange& k : r.knobs) {
    knobs.push_back(
        Json{{"stage", k.stage},
             {"knob", k.knob},
             {"baseline", k.baseline},
             {"now", k.now},
             {"predicted_change", k.predicted_change ? Finite(*k.predicted_change) : Json(nullptr)}});
  }
  Json j{{"verdict", VerdictName(r.verdict)},
         {"pipeline", r.pipeline},
         {"tolerance", r.tolerance},
         {"timed", r.timed}};
  j["throughput"] = r.timed ? ShiftJson(r.throughput) : Json(nullptr);
  j["throughput_regressed"] = r.throughput_regressed;
  j["bottleneck"] = r.bottleneck ? Json(*r.bottleneck) : Json(nullptr);
  j["why"] = r.why;
  j["stages"] = stages;
  j["knobs"] = knobs;
  j["config"] = Json{{"predicted_before", Finite(r.predicted_before)},
                     {"predicted_after", Finite(r.predicted_after)},
                     {"predicted_change", Finite(r.predicted_change)},
                     {"regressed", r.config_regressed}};
  j["machine"] = Json{{"drift", r.machine_drift},
                      {"factor", Finite(r.machine_factor)},
                      {"busy", r.machine_busy},
                      {"contention_change", Finite(r.contention.change)}};
  j["notes"] = r.notes;
  return j;
}

std::string FormatCheckText(const CheckReport& r) {
  std::string out = fmt::format("pipetune check: {}\n{}\n", r.pipeline, Headline(r));
  if (r.timed) {
    out += "  " + ThroughputLine(r) + (r.throughput_regressed ? "  REGRESSED" : "") + "\n";
    out += "  " + BindsLine(r) + "\n";
    for (const StageCheck& s : r.stages) {
      const Shift& c = s.cpu_per_element;
      out += fmt::format("  {:<16} {:>9.1f} -> {:>9.1f} us/element  {}{}\n", s.name, c.baseline_median * 1e6,
                         c.new_median * 1e6, s.regressed ? "REGRESSED: " : "", s.why);
    }
  }
  if (!r.knobs.empty()) {
    out += fmt::format("  config: model {:.1f} -> {:.1f} outputs/s ({}){}\n", r.predicted_before,
                       r.predicted_after, PercentChange(r.predicted_change),
                       r.config_regressed ? "  REGRESSED" : "");
    for (const KnobChange& k : r.knobs) out += "    " + KnobLine(k) + "\n";
  } else {
    out += "  config: knobs as in the baseline\n";
  }
  for (const std::string& note : r.notes) out += "  note: " + note + "\n";
  return out;
}

std::string FormatCheckMarkdown(const CheckReport& r) {
  std::string icon = r.verdict == Verdict::kPass ? "✅" : r.verdict == Verdict::kMachine ? "⚠️" : "❌";
  std::string out = fmt::format("### {} pipetune check: `{}`\n\n**{}**\n\n", icon, r.pipeline, Headline(r));
  if (r.timed) {
    out += "- " + ThroughputLine(r) + "\n- " + BindsLine(r) + "\n\n";
    out += "| stage | CPU µs/element (baseline) | now | change | verdict |\n|---|---:|---:|---:|---|\n";
    for (const StageCheck& s : r.stages) {
      const Shift& c = s.cpu_per_element;
      out += fmt::format("| `{}` | {:.1f} | {:.1f} | {} | {}{} |\n", s.name, c.baseline_median * 1e6,
                         c.new_median * 1e6, PercentChange(c.change), s.regressed ? "**regressed** " : "",
                         s.why);
    }
    out += "\n";
  }
  if (!r.knobs.empty()) {
    out += fmt::format("Config: the model predicts {:.1f} → {:.1f} outputs/s ({}){}\n\n", r.predicted_before,
                       r.predicted_after, PercentChange(r.predicted_change),
                       r.config_regressed ? " — **regressed**" : "");
    out += "| stage | knob | baseline | now | predicted change |\n|---|---|---|---|---:|\n";
    for (const KnobChange& k : r.knobs) {
      out += fmt::format("| `{}` | {} | {} | {} | {} |\n", k.stage, k.knob, k.baseline, k.now,
                         k.predicted_change ? PercentChange(*k.predicted_change) : "not priced");
    }
    out += "\n";
  }
  for (const std::string& note : r.notes) out += "> " + note + "\n";
  return out;
}

std::string FormatCheckJunit(const CheckReport& r) {
  struct Case {
    std::string name;
    bool failed;
    bool skipped;
    std::string message;
  };
  std::vector<Case> cases;
  for (const StageCheck& s : r.stages) cases.push_back({"stage " + s.name, s.regressed, !s.judged, s.why});
  if (r.timed) {
    cases.push_back({"throughput", r.throughput_regressed, false, ThroughputLine(r) + "; " + BindsLine(r)});
  }
  std::string config_message = r.knobs.empty() ? "knobs as in the baseline" : "";
  for (const KnobChange& k : r.knobs) config_message += (config_message.empty() ? "" : "; ") + KnobLine(k);
  cases.push_back({"config", r.config_regressed, false, config_message});
  if (r.machine_drift || r.machine_busy) cases.push_back({"machine", false, false, Headline(r)});

  size_t failures = 0, skipped = 0;
  for (const Case& c : cases) {
    failures += c.failed ? 1 : 0;
    skipped += c.skipped ? 1 : 0;
  }
  std::string suite = EscapeXml("pipetune check " + r.pipeline);
  std::string out = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
  out += fmt::format("<testsuites name=\"{}\" tests=\"{}\" failures=\"{}\" skipped=\"{}\">\n", suite,
                     cases.size(), failures, skipped);
  out += fmt::format("  <testsuite name=\"{}\" tests=\"{}\" failures=\"{}\" skipped=\"{}\">\n", suite,
                     cases.size(), failures, skipped);
  for (const Case& c : cases) {
    out += fmt::format("    <testcase classname=\"{}\" name=\"{}\">", suite, EscapeXml(c.name));
    if (c.failed) {
      out += fmt::format("<failure message=\"{}\"/>", EscapeXml(c.message));
    } else if (c.skipped) {
      out += fmt::format("<skipped message=\"{}\"/>", EscapeXml(c.message));
    } else {
      out += fmt::format("<system-out>{}</system-out>", EscapeXml(c.message));
    }
    out += "</testcase>\n";
  }
  out += "  </testsuite>\n</testsuites>\n";
  return out;
}

}  // namespace pipetune::workflow

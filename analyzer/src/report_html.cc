// The HTML report: one self-contained page (inline CSS and SVG, no script,
// nothing fetched) with the sentence, the key figures, four charts
// (throughput over time, consumer stall over time, predicted against
// measured with every bound, per-stage utilisation) and the stage table.
#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cmath>

#include "format_util.h"
#include "pipetune/base/size.h"
#include "pipetune/base/text.h"
#include "pipetune/models/config.h"
#include "report_rows.h"
#include "svg.h"
#include "writers.h"

namespace pipetune::analyzer::internal {
namespace {

constexpr const char* kBlue = "#2166ac";
constexpr const char* kOrange = "#d6604d";
constexpr const char* kGreen = "#4d9221";
constexpr const char* kGrey = "#9e9e9e";
constexpr int kChartWidth = 600;

constexpr const char* kStyle = R"(
body { font: 14px/1.45 -apple-system, "Segoe UI", Helvetica, Arial, sans-serif; color: #222; margin: 24px 32px; max-width: 1240px; }
h1 { font-size: 20px; margin: 0 0 4px; }
h2 { font-size: 15px; margin: 28px 0 8px; border-bottom: 1px solid #ddd; padding-bottom: 4px; }
.sub { color: #666; font-size: 12px; }
.summary { background: #fff7e6; border-left: 4px solid #f0a020; padding: 10px 14px; margin: 14px 0; font-size: 15px; }
.warning { background: #fdecea; border-left: 4px solid #d93025; padding: 8px 14px; margin: 10px 0; }
.cards { display: flex; flex-wrap: wrap; gap: 10px; margin: 12px 0; }
.card { border: 1px solid #e0e0e0; border-radius: 6px; padding: 8px 12px; min-width: 120px; }
.card .v { font-size: 20px; font-weight: 600; }
.card .l { font-size: 11px; color: #666; text-transform: uppercase; letter-spacing: 0.04em; }
.charts { display: grid; grid-template-columns: repeat(2, 610px); gap: 12px 16px; }
.chart { border: 1px solid #eee; border-radius: 6px; padding: 4px; }
table { border-collapse: collapse; font-size: 13px; }
th, td { padding: 4px 10px; border-bottom: 1px solid #eee; }
th { text-align: left; background: #fafafa; font-weight: 600; }
td.r, th.r { text-align: right; font-variant-numeric: tabular-nums; }
tr.bottleneck td { background: #fff1e0; font-weight: 600; }
ul { margin: 4px 0; padding-left: 20px; }
)";

std::string Card(const std::string& label, const std::string& value) {
  return fmt::format(R"(<div class="card"><div class="l">{}</div><div class="v">{}</div></div>)",
                     EscapeXml(label), EscapeXml(value));
}

std::string ThroughputChart(const Diagnosis& d) {
  LineChart chart;
  chart.title = "Throughput over time";
  chart.x_label = "seconds since the trace started";
  chart.y_label = "outputs/s";
  chart.width = kChartWidth;
  Series measured{"measured", kBlue, {}, true};
  for (const TimelinePoint& p : d.timeline) measured.points.emplace_back(p.seconds, p.throughput);
  chart.series.push_back(measured);
  chart.lines.push_back({d.predicted_throughput, "predicted " + Rate(d.predicted_throughput), kOrange});
  if (d.demand_throughput &&
      std::fabs(*d.demand_throughput - d.predicted_throughput) > 0.02 * d.predicted_throughput) {
    chart.lines.push_back({*d.demand_throughput, "demand " + Rate(*d.demand_throughput), kGreen});
  }
  chart.shaded_x = std::make_pair(d.window_begin_seconds, d.window_end_seconds);
  chart.shaded_label = "measured window";
  return RenderLineChart(chart);
}

std::string StallChart(const Diagnosis& d) {
  LineChart chart;
  chart.title = "Consumer stall over time (waiting for input)";
  chart.x_label = "seconds since the trace started";
  chart.y_label = "share of time";
  chart.width = kChartWidth;
  chart.percent = true;
  chart.y_max = 1.0;
  Series stall{"stall", kOrange, {}, true};
  Series cpu{"cores used / cores", kGrey, {}, false};
  for (const TimelinePoint& p : d.timeline) {
    stall.points.emplace_back(p.seconds, p.stall_fraction);
    if (d.cores > 0) cpu.points.emplace_back(p.seconds, std::min(1.0, p.cores_used / d.cores));
  }
  chart.series.push_back(stall);
  if (!cpu.points.empty()) chart.series.push_back(cpu);
  chart.shaded_x = std::make_pair(d.window_begin_seconds, d.window_end_seconds);
  chart.shaded_label = "measured window";
  return RenderLineChart(chart);
}

// Measured and predicted throughput, and every bound of the model from the
// tightest up: the binding one is the prediction. Bounds far above it are cut
// so that the ones that matter stay readable.
std::string PredictionChart(const Diagnosis& d) {
  BarChart chart;
  chart.title = "Predicted against measured (outputs/s), with every bound";
  chart.width = kChartWidth;
  chart.bars.push_back({"measured", d.measured_throughput, kBlue, ""});
  chart.bars.push_back({"predicted", d.predicted_throughput, kOrange, "(" + RatioText(d) + ")"});
  const models::Prediction& p = d.prediction;
  std::vector<models::Bound> bounds;
  for (const models::Bound& bound : p.bounds) {
    if (std::isfinite(bound.throughput)) bounds.push_back(bound);
  }
  std::stable_sort(bounds.begin(), bounds.end(), [](const models::Bound& a, const models::Bound& b) {
    return a.throughput < b.throughput;
  });
  for (const models::Bound& bound : bounds) {
    std::string label = std::string(models::BoundKindName(bound.kind)) + " bound";
    if (bound.kind == models::BoundKind::kConcurrency && bound.group) {
      label = d.profile.groups[*bound.group].name + " (all their stages)";
    } else if (bound.kind == models::BoundKind::kConcurrency && bound.stage) {
      label = "stage " + d.profile.stages[*bound.stage].name;
    }
    bool binding = bound.kind == p.binding.kind && bound.stage == p.binding.stage;
    chart.bars.push_back({label, bound.throughput, binding ? kOrange : kGrey, binding ? "(binds)" : ""});
  }
  chart.markers.push_back({d.measured_throughput, "measured", kBlue});
  chart.axis_max = 3 * std::max(d.measured_throughput, d.predicted_throughput);
  return RenderBarChart(chart);
}

std::string UtilisationCharts(const Diagnosis& d) {
  StackedBars bars;
  bars.title = "Per-stage utilisation in the window (share of worker time)";
  bars.width = kChartWidth;
  bars.segment_names = {"busy", "waiting for input", "blocked on output"};
  bars.segment_colors = {kBlue, "#92c5de", "#f4a582"};
  HeatStrip heat;
  heat.title = "Per-stage busy share over time";
  heat.width = kChartWidth;
  heat.x_label = "seconds since the trace started";
  for (size_t s = 0; s < d.stages.size(); ++s) {
    const StageDiagnosis& stage = d.stages[s];
    std::string label = stage.bottleneck ? stage.name + " *" : stage.name;
    bars.row_labels.push_back(label);
    bars.values.push_back({stage.busy_fraction, stage.wait_input_fraction, stage.wait_output_fraction});
    heat.row_labels.push_back(label);
    std::vector<double> row;
    for (const TimelinePoint& p : d.timeline) row.push_back(s < p.stage_busy.size() ? p.stage_busy[s] : 0.0);
    heat.values.push_back(row);
  }
  if (!d.timeline.empty()) {
    heat.x_min = d.timeline.front().seconds;
    heat.x_max = d.timeline.back().seconds;
  }
  return fmt::format(R"(<div class="chart">{}</div><div class="chart">{}</div>)", RenderStackedBars(bars),
                     RenderHeatStrip(heat));
}

// `marked`: what a highlighted row is ("bottleneck", "straggler").
// "ranks" -> "Ranks": a section's name as the HTML report's heading.
std::string Capitalized(std::string name) {
  if (!name.empty()) name[0] = static_cast<char>(std::toupper(static_cast<unsigned char>(name[0])));
  return name;
}

std::string TableHtml(const Table& table, const char* marked) {
  std::string html = "<table><tr>";
  for (size_t c = 0; c < table.header.size(); ++c) {
    html += fmt::format(R"(<th{}>{}</th>)", table.right_aligned[c] ? R"( class="r")" : "",
                        EscapeXml(table.header[c]));
  }
  html += "</tr>\n";
  for (size_t r = 0; r < table.rows.size(); ++r) {
    html += table.highlighted[r] ? R"(<tr class="bottleneck">)" : "<tr>";
    for (size_t c = 0; c < table.rows[r].size(); ++c) {
      std::string cell = EscapeXml(table.rows[r][c]);
      if (c == 0 && table.highlighted[r]) cell += fmt::format(" ({})", marked);
      html += fmt::format(R"(<td{}>{}</td>)", table.right_aligned[c] ? R"( class="r")" : "", cell);
    }
    html += "</tr>\n";
  }
  return html + "</table>\n";
}

std::string List(const std::vector<std::string>& items) {
  std::string html = "<ul>";
  for (const std::string& item : items) html += "<li>" + EscapeXml(item) + "</li>";
  return html + "</ul>\n";
}

class HtmlWriter : public ReportWriter {
 public:
  std::string Render(const Diagnosis& d) const override {
    std::string title = "pipetune report: " + d.pipeline_name;
    std::string html = fmt::format(
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta "
        "charset=\"utf-8\">\n<title>{}</title>\n<style>{}</style>\n"
        "</head>\n<body>\n",
        EscapeXml(title), kStyle);
    html +=
        fmt::format("<h1>{}</h1>\n<div class=\"sub\">trace {} ({:.1f} s); window {}</div>\n",
                    EscapeXml(title), EscapeXml(d.trace_name), d.trace_seconds, EscapeXml(d.window_reason));
    if (!d.truncation_warning.empty()) {
      html += fmt::format("<div class=\"warning\">{}</div>\n", EscapeXml(d.truncation_warning));
    }
    html += fmt::format("<div class=\"summary\">{}</div>\n", EscapeXml(d.summary));
    html += "<div class=\"cards\">";
    html += Card("measured", Rate(d.measured_throughput) + " outputs/s");
    html += Card("predicted", fmt::format("{} ({})", Rate(d.predicted_throughput), RatioText(d)));
    html += Card("bound", d.bottleneck ? fmt::format("{}: {}", models::BoundKindName(d.bound), *d.bottleneck)
                                       : std::string(models::BoundKindName(d.bound)));
    html += Card("consumer stall", Percent(d.stall_fraction));
    html +=
        Card("cores used", d.cores_used >= 0 ? Cores(d.cores_used) + " of " + CoreCount(d.cores) : "unknown");
    html += Card("peak RSS", FormatBytes(static_cast<double>(d.peak_rss_bytes)));
    html += Card("dropped events",
                 DropsText(d) == "none" ? "none" : DropsText(d).substr(0, DropsText(d).find(" (")));
    html += "</div>\n";
    html += "<h2>Charts</h2>\n<div class=\"charts\">";
    html += fmt::format(R"(<div class="chart">{}</div>)", ThroughputChart(d));
    html += fmt::format(R"(<div class="chart">{}</div>)", StallChart(d));
    html += fmt::format(R"(<div class="chart">{}</div>)", PredictionChart(d));
    html += UtilisationCharts(d);
    html += "</div>\n";
    if (d.kind_report && d.kind_report->processes) {
      const ProcessesReport& processes = *d.kind_report->processes;
      html += fmt::format("<h2>{}</h2>\n", EscapeXml(Capitalized(processes.name))) +
              TableHtml(processes.table, processes.marked.c_str());
      html += fmt::format("<div class=\"sub\">{}</div>\n", EscapeXml(processes.line));
    }
    html += "<h2>Stages</h2>\n" + TableHtml(StageTable(d), "bottleneck");
    std::vector<std::string> what_ifs = WhatIfLines(d);
    if (!what_ifs.empty()) html += "<h2>What if</h2>\n" + List(what_ifs);
    std::vector<std::string> facts;
    for (const auto& [label, value] : Headline(d)) facts.push_back(fmt::format("{}: {}", label, value));
    html += "<h2>Details</h2>\n" + List(facts);
    if (!d.assumptions.empty()) html += "<h2>Assumptions</h2>\n" + List(d.assumptions);
    return html + "</body>\n</html>\n";
  }
};

}  // namespace

std::unique_ptr<ReportWriter> MakeHtmlWriter() { return std::make_unique<HtmlWriter>(); }

}  // namespace pipetune::analyzer::internal

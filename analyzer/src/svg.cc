// Inline-SVG charts (svg.h).
#include "svg.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "format_util.h"
#include "pipetune/base/text.h"

namespace pipetune::analyzer::internal {
namespace {

constexpr int kLeft = 56;  // room for y tick labels
constexpr int kRight = 16;
constexpr int kTop = 28;     // title
constexpr int kBottom = 40;  // x ticks and label
constexpr const char* kAxis = "#888";
constexpr const char* kGrid = "#e4e4e4";
constexpr const char* kText = "#333";

// A "nice" tick step (1, 2 or 5 times a power of ten) giving about `count` ticks.
double NiceStep(double span, int count) {
  if (!(span > 0)) return 1;
  double raw = span / count;
  double power = std::pow(10.0, std::floor(std::log10(raw)));
  for (double m : {1.0, 2.0, 5.0, 10.0}) {
    if (m * power >= raw) return m * power;
  }
  return 10 * power;
}

// Row labels (a stage's name) sit right-aligned in a column left of the
// plot. The column is as wide as the longest label needs, at least the
// chart's own minimum and at most kMostLabelShare of the chart; a label
// longer than that is shortened in its middle ("transform[0]:Ran…zedCrop"
// keeps the transform's index and the end of its class name), with its
// whole name as the label's tooltip. A fixed column cut long names from the
// left in the browser ("]:RandomResizedCrop").
constexpr double kLabelCharWidth = 6.6;  // an 11 px sans-serif character, a little over the average
constexpr double kMostLabelShare = 0.4;
constexpr int kLabelGap = 6;  // between a label and the plot

size_t CodePoints(std::string_view text) {
  return static_cast<size_t>(std::count_if(text.begin(), text.end(), [](char c) {
    return (static_cast<unsigned char>(c) & 0xC0) != 0x80;  // not a UTF-8 continuation byte
  }));
}

// The byte offset of code point `n` (text.size() past the last).
size_t CodePointOffset(std::string_view text, size_t n) {
  size_t seen = 0;
  for (size_t i = 0; i < text.size(); ++i) {
    if ((static_cast<unsigned char>(text[i]) & 0xC0) == 0x80) continue;
    if (seen++ == n) return i;
  }
  return text.size();
}

int LabelColumn(const std::vector<std::string>& labels, int least, int chart_width) {
  size_t longest = 0;
  for (const std::string& label : labels) longest = std::max(longest, CodePoints(label));
  int wanted = static_cast<int>(std::ceil(static_cast<double>(longest) * kLabelCharWidth)) + kLabelGap;
  int most = static_cast<int>(kMostLabelShare * chart_width);
  return std::clamp(wanted, std::min(least, most), std::max(least, most));
}

std::string ShortenInTheMiddle(const std::string& label, size_t most_chars) {
  size_t chars = CodePoints(label);
  if (chars <= most_chars || most_chars < 3) return label;
  size_t keep = most_chars - 1;  // the ellipsis is one
  size_t head = (keep + 1) / 2;
  size_t tail = keep - head;
  return label.substr(0, CodePointOffset(label, head)) + "\xE2\x80\xA6" +
         label.substr(CodePointOffset(label, chars - tail));
}

// A row's label, right-aligned against a column `column` wide.
std::string RowLabel(const std::string& label, int column, int y) {
  size_t fits = static_cast<size_t>(std::max(0.0, (column - kLabelGap) / kLabelCharWidth));
  std::string shown = ShortenInTheMiddle(label, fits);
  std::string tooltip = shown == label ? "" : fmt::format("<title>{}</title>", EscapeXml(label));
  return fmt::format(R"(<text x="{}" y="{}" font-size="11" text-anchor="end" fill="{}">{}{}</text>)",
                     column - kLabelGap, y, kText, tooltip, EscapeXml(shown));
}

std::string Tick(double value, bool percent) {
  if (percent) return fmt::format("{:.0f}%", value * 100);
  return Rate(value);
}

std::string Title(const std::string& title, int x) {
  return fmt::format(R"(<text x="{}" y="17" font-size="13" font-weight="600" fill="{}">{}</text>)", x, kText,
                     EscapeXml(title));
}

}  // namespace

std::string RenderLineChart(const LineChart& chart) {
  double x_min = std::numeric_limits<double>::infinity(), x_max = -x_min, y_top = 0;
  for (const Series& s : chart.series) {
    for (const auto& [x, y] : s.points) {
      x_min = std::min(x_min, x);
      x_max = std::max(x_max, x);
      if (std::isfinite(y)) y_top = std::max(y_top, y);
    }
  }
  for (const ReferenceLine& line : chart.lines) {
    if (std::isfinite(line.y)) y_top = std::max(y_top, line.y);
  }
  if (!std::isfinite(x_min)) x_min = 0, x_max = 1;
  x_min = std::min(x_min, 0.0);
  if (x_max <= x_min) x_max = x_min + 1;
  if (chart.y_max) y_top = *chart.y_max;
  double y_step = NiceStep(y_top > 0 ? y_top : 1, 4);
  y_top = chart.y_max ? *chart.y_max : std::max(y_step, std::ceil(y_top * 1.05 / y_step) * y_step);

  int plot_w = chart.width - kLeft - kRight, plot_h = chart.height - kTop - kBottom;
  auto px = [&](double x) { return kLeft + (x - x_min) / (x_max - x_min) * plot_w; };
  auto py = [&](double y) { return kTop + plot_h - std::clamp(y / y_top, 0.0, 1.0) * plot_h; };

  std::string svg = fmt::format(
      R"(<svg xmlns="http://www.w3.org/2000/svg" width="{0}" height="{1}" viewBox="0 0 {0} {1}" role="img" aria-label="{2}">)",
      chart.width, chart.height, EscapeXml(chart.title));
  svg += Title(chart.title, kLeft);
  if (chart.shaded_x) {
    double a = px(chart.shaded_x->first), b = px(chart.shaded_x->second);
    svg += fmt::format(R"(<rect x="{:.1f}" y="{}" width="{:.1f}" height="{}" fill="#f3f6fb"/>)", a, kTop,
                       std::max(0.0, b - a), plot_h);
    svg += fmt::format(R"(<text x="{:.1f}" y="{}" font-size="10" fill="#6b7c93">{}</text>)", a + 3, kTop + 11,
                       EscapeXml(chart.shaded_label));
  }
  // Ticks by an integer index (no accumulated rounding, no floating-point
  // loop counter).
  for (int tick = 0; tick * y_step <= y_top * 1.0001; ++tick) {
    double y = tick * y_step;
    svg += fmt::format(R"(<line x1="{}" x2="{}" y1="{:.1f}" y2="{:.1f}" stroke="{}"/>)", kLeft,
                       kLeft + plot_w, py(y), py(y), kGrid);
    svg += fmt::format(R"(<text x="{}" y="{:.1f}" font-size="10" text-anchor="end" fill="{}">{}</text>)",
                       kLeft - 5, py(y) + 3, kText, Tick(y, chart.percent));
  }
  double x_step = NiceStep(x_max - x_min, 6);
  double x_first = std::ceil(x_min / x_step);
  for (int tick = 0; (x_first + tick) * x_step <= x_max + 1e-9; ++tick) {
    double x = (x_first + tick) * x_step;
    svg += fmt::format(R"(<line x1="{0:.1f}" x2="{0:.1f}" y1="{1}" y2="{2}" stroke="{3}"/>)", px(x),
                       kTop + plot_h, kTop + plot_h + 4, kAxis);
    svg += fmt::format(R"(<text x="{:.1f}" y="{}" font-size="10" text-anchor="middle" fill="{}">{}</text>)",
                       px(x), kTop + plot_h + 15, kText, Rate(x));
  }
  svg += fmt::format(R"(<line x1="{0}" x2="{1}" y1="{2}" y2="{2}" stroke="{3}"/>)", kLeft, kLeft + plot_w,
                     kTop + plot_h, kAxis);
  svg += fmt::format(R"(<text x="{}" y="{}" font-size="11" text-anchor="middle" fill="{}">{}</text>)",
                     kLeft + plot_w / 2, chart.height - 6, kText, EscapeXml(chart.x_label));
  svg += fmt::format(
      R"svg(<text x="12" y="{0}" font-size="11" text-anchor="middle" fill="{1}" transform="rotate(-90 12 {0})">{2}</text>)svg",
      kTop + plot_h / 2, kText, EscapeXml(chart.y_label));
  for (const Series& s : chart.series) {
    if (s.points.empty()) continue;
    std::string path;
    for (const auto& [x, y] : s.points) {
      path += fmt::format("{}{:.1f},{:.1f} ", path.empty() ? "M" : "L", px(x), py(std::isfinite(y) ? y : 0));
    }
    if (s.area) {
      std::string area = path + fmt::format("L{:.1f},{:.1f} L{:.1f},{:.1f} Z", px(s.points.back().first),
                                            py(0), px(s.points.front().first), py(0));
      svg += fmt::format(R"(<path d="{}" fill="{}" fill-opacity="0.18" stroke="none"/>)", area, s.color);
    }
    svg += fmt::format(R"(<path d="{}" fill="none" stroke="{}" stroke-width="1.6"/>)", path, s.color);
  }
  int legend_x = kLeft + plot_w;
  for (const ReferenceLine& line : chart.lines) {
    if (!std::isfinite(line.y) || line.y > y_top) continue;
    svg += fmt::format(
        R"(<line x1="{}" x2="{}" y1="{:.1f}" y2="{:.1f}" stroke="{}" stroke-dasharray="5 3" stroke-width="1.3"/>)",
        kLeft, kLeft + plot_w, py(line.y), py(line.y), line.color);
    svg += fmt::format(R"(<text x="{}" y="{:.1f}" font-size="10" text-anchor="end" fill="{}">{}</text>)",
                       legend_x - 2, py(line.y) - 3, line.color, EscapeXml(line.label));
  }
  // Legend for the series, top right.
  int lx = chart.width - kRight;
  for (auto it = chart.series.rbegin(); it != chart.series.rend(); ++it) {
    int text_w = static_cast<int>(it->name.size()) * 6 + 18;
    lx -= text_w;
    svg += fmt::format(R"(<rect x="{}" y="9" width="10" height="10" fill="{}"/>)", lx, it->color);
    svg += fmt::format(R"(<text x="{}" y="18" font-size="10" fill="{}">{}</text>)", lx + 13, kText,
                       EscapeXml(it->name));
  }
  return svg + "</svg>";
}

std::string RenderBarChart(const BarChart& chart) {
  constexpr int kRow = 24, kValueRoom = 150;
  std::vector<std::string> labels;
  for (const Bar& bar : chart.bars) labels.push_back(bar.label);
  const int label_column = LabelColumn(labels, 170, chart.width);
  int height = kTop + static_cast<int>(chart.bars.size()) * kRow + 10;
  double top = 0;
  for (const Bar& bar : chart.bars) {
    if (std::isfinite(bar.value)) top = std::max(top, bar.value);
  }
  for (const ReferenceLine& m : chart.markers) top = std::max(top, m.y);
  if (chart.axis_max && *chart.axis_max < top) top = *chart.axis_max;
  top = top > 0 ? top * 1.05 : 1;
  int plot_w = chart.width - label_column - kValueRoom;
  auto px = [&](double v) { return label_column + std::clamp(v / top, 0.0, 1.0) * plot_w; };
  std::string svg = fmt::format(
      R"(<svg xmlns="http://www.w3.org/2000/svg" width="{0}" height="{1}" viewBox="0 0 {0} {1}" role="img" aria-label="{2}">)",
      chart.width, height, EscapeXml(chart.title));
  svg += Title(chart.title, 8);
  for (size_t i = 0; i < chart.bars.size(); ++i) {
    const Bar& bar = chart.bars[i];
    int y = kTop + static_cast<int>(i) * kRow;
    bool unbounded = !std::isfinite(bar.value);
    bool cut = unbounded || bar.value > top;
    double end = cut ? px(top) : px(bar.value);
    svg += RowLabel(bar.label, label_column, y + 14);
    svg +=
        fmt::format(R"(<rect x="{}" y="{}" width="{:.1f}" height="16" fill="{}"{}/>)", label_column, y + 2,
                    std::max(1.0, end - label_column), bar.color, unbounded ? R"( fill-opacity="0.25")" : "");
    if (cut) {
      svg += fmt::format(R"(<path d="M{0:.1f},{1} l7,8 l-7,8 Z" fill="{2}"{3}/>)", end, y + 2, bar.color,
                         unbounded ? R"( fill-opacity="0.25")" : "");
      end += 7;
    }
    std::string value = unbounded ? "unbounded" : Rate(bar.value);
    if (!bar.note.empty()) value += " " + bar.note;
    svg += fmt::format(R"(<text x="{:.1f}" y="{}" font-size="11" fill="{}">{}</text>)", end + 5, y + 14,
                       kText, EscapeXml(value));
  }
  for (const ReferenceLine& m : chart.markers) {
    svg += fmt::format(
        R"(<line x1="{0:.1f}" x2="{0:.1f}" y1="{1}" y2="{2}" stroke="{3}" stroke-dasharray="4 3" stroke-width="1.5"/>)",
        px(m.y), kTop - 4, height - 6, m.color);
  }
  return svg + "</svg>";
}

std::string RenderHeatStrip(const HeatStrip& chart) {
  constexpr int kRow = 20;
  const int label_column = LabelColumn(chart.row_labels, 120, chart.width);
  int height = kTop + static_cast<int>(chart.row_labels.size()) * kRow + kBottom - 10;
  int plot_w = chart.width - label_column - kRight;
  std::string svg = fmt::format(
      R"(<svg xmlns="http://www.w3.org/2000/svg" width="{0}" height="{1}" viewBox="0 0 {0} {1}" role="img" aria-label="{2}">)",
      chart.width, height, EscapeXml(chart.title));
  svg += Title(chart.title, 8);
  for (size_t r = 0; r < chart.row_labels.size(); ++r) {
    int y = kTop + static_cast<int>(r) * kRow;
    svg += RowLabel(chart.row_labels[r], label_column, y + 14);
    const std::vector<double>& row = chart.values[r];
    double cell = row.empty() ? 0 : static_cast<double>(plot_w) / static_cast<double>(row.size());
    for (size_t c = 0; c < row.size(); ++c) {
      double v = std::clamp(row[c], 0.0, 1.0);
      // White (idle) to deep blue (busy).
      int red = static_cast<int>(247 - v * (247 - 33));
      int green = static_cast<int>(251 - v * (251 - 102));
      int blue = static_cast<int>(255 - v * (255 - 172));
      svg += fmt::format(R"(<rect x="{:.2f}" y="{}" width="{:.2f}" height="{}" fill="#{:02x}{:02x}{:02x}"/>)",
                         label_column + c * cell, y + 1, cell + 0.3, kRow - 3, red, green, blue);
    }
  }
  int axis_y = kTop + static_cast<int>(chart.row_labels.size()) * kRow;
  double span = chart.x_max - chart.x_min;
  if (span > 0) {
    double step = NiceStep(span, 6);
    double first = std::ceil(chart.x_min / step);
    for (int tick = 0; (first + tick) * step <= chart.x_max + 1e-9; ++tick) {
      double x = (first + tick) * step;
      double p = label_column + (x - chart.x_min) / span * plot_w;
      svg += fmt::format(R"(<text x="{:.1f}" y="{}" font-size="10" text-anchor="middle" fill="{}">{}</text>)",
                         p, axis_y + 12, kText, Rate(x));
    }
  }
  svg += fmt::format(R"(<text x="{}" y="{}" font-size="11" text-anchor="middle" fill="{}">{}</text>)",
                     label_column + plot_w / 2, axis_y + 26, kText, EscapeXml(chart.x_label));
  return svg + "</svg>";
}

std::string RenderStackedBars(const StackedBars& chart) {
  constexpr int kRow = 22;
  const int label_column = LabelColumn(chart.row_labels, 120, chart.width);
  int height = kTop + 16 + static_cast<int>(chart.row_labels.size()) * kRow + 6;
  int plot_w = chart.width - label_column - kRight;
  std::string svg = fmt::format(
      R"(<svg xmlns="http://www.w3.org/2000/svg" width="{0}" height="{1}" viewBox="0 0 {0} {1}" role="img" aria-label="{2}">)",
      chart.width, height, EscapeXml(chart.title));
  svg += Title(chart.title, 8);
  int lx = label_column;
  for (size_t s = 0; s < chart.segment_names.size(); ++s) {
    svg += fmt::format(R"(<rect x="{}" y="{}" width="10" height="10" fill="{}"/>)", lx, kTop - 2,
                       chart.segment_colors[s]);
    svg += fmt::format(R"(<text x="{}" y="{}" font-size="10" fill="{}">{}</text>)", lx + 13, kTop + 7, kText,
                       EscapeXml(chart.segment_names[s]));
    lx += static_cast<int>(chart.segment_names[s].size()) * 6 + 30;
  }
  for (size_t r = 0; r < chart.row_labels.size(); ++r) {
    int y = kTop + 16 + static_cast<int>(r) * kRow;
    svg += RowLabel(chart.row_labels[r], label_column, y + 14);
    svg += fmt::format(R"(<rect x="{}" y="{}" width="{}" height="16" fill="#f2f2f2"/>)", label_column, y + 2,
                       plot_w);
    double x = label_column;
    for (size_t s = 0; s < chart.values[r].size(); ++s) {
      double w = std::clamp(chart.values[r][s], 0.0, 1.0) * plot_w;
      if (w <= 0) continue;
      svg += fmt::format(R"(<rect x="{:.1f}" y="{}" width="{:.1f}" height="16" fill="{}"/>)", x, y + 2, w,
                         chart.segment_colors[s]);
      x += w;
    }
  }
  return svg + "</svg>";
}

}  // namespace pipetune::analyzer::internal

// Small inline-SVG charts for the HTML report: no scripts, no fonts to
// fetch, nothing from the network. Every chart is a string of <svg>.
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace pipetune::analyzer::internal {

struct Series {
  std::string name;
  std::string color;
  std::vector<std::pair<double, double>> points;  // (x, y)
  bool area = false;                              // filled down to zero
};

struct ReferenceLine {
  double y = 0;
  std::string label;
  std::string color;
};

struct LineChart {
  std::string title;
  std::string x_label;
  std::string y_label;
  int width = 560;
  int height = 240;
  std::optional<double> y_max;  // default: from the data and lines
  bool percent = false;         // y in 0..1, shown as %
  std::vector<Series> series;
  std::vector<ReferenceLine> lines;
  std::optional<std::pair<double, double>> shaded_x;  // the measured window
  std::string shaded_label;
};

std::string RenderLineChart(const LineChart& chart);

struct Bar {
  std::string label;
  double value = 0;  // +inf is drawn as "unbounded"
  std::string color;
  std::string note;  // text after the value
};

// Horizontal bars, one per row, with optional vertical marker lines.
struct BarChart {
  std::string title;
  std::string unit;
  int width = 560;
  std::vector<Bar> bars;
  std::vector<ReferenceLine> markers;  // vertical lines at x = y
  // The axis ends here; longer bars are cut and end in an arrow. Default:
  // the longest finite bar.
  std::optional<double> axis_max;
};

std::string RenderBarChart(const BarChart& chart);

// Rows of 0..1 values over time, drawn as coloured cells (a heat strip).
struct HeatStrip {
  std::string title;
  int width = 560;
  std::vector<std::string> row_labels;
  std::vector<std::vector<double>> values;  // [row][column]
  double x_min = 0, x_max = 0;              // time span of the columns
  std::string x_label;
};

std::string RenderHeatStrip(const HeatStrip& chart);

// Stacked horizontal bars of fractions (each row sums to at most 1).
struct StackedBars {
  std::string title;
  int width = 560;
  std::vector<std::string> segment_names;
  std::vector<std::string> segment_colors;
  std::vector<std::string> row_labels;
  std::vector<std::vector<double>> values;  // [row][segment]
};

std::string RenderStackedBars(const StackedBars& chart);

}  // namespace pipetune::analyzer::internal

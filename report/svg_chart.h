// A small x/y chart as inline SVG markup, for the HTML job report: axes with
// round ticks, series drawn as dots, lines or steps, vertical marker lines
// and an optional y = x diagonal. Every text that reaches the markup is
// HTML-escaped here (labels may come from a job). Pure; any thread.
#ifndef AUTOACCEL_REPORT_SVG_CHART_H_
#define AUTOACCEL_REPORT_SVG_CHART_H_

#include <string>
#include <vector>

#include "absl/strings/string_view.h"

namespace autoaccel {

// `text` with & < > " ' replaced by entities: safe in HTML text and in a
// quoted attribute.
std::string HtmlEscape(absl::string_view text);

struct ChartPoint {
  double x = 0, y = 0;
  std::string tooltip;  // shown on hover (an SVG <title>); "" for none
};

struct ChartSeries {
  enum class Style { kDots, kLine, kStep };  // kStep: horizontal, then vertical
  std::string name;                          // the legend's entry
  std::string color;                         // a CSS color, from the report (not from a job)
  Style style = Style::kDots;
  std::vector<ChartPoint> points;
  // kStep: continue the last level to the chart's right edge.
  bool extend_to_right = false;
};

struct ChartMarker {
  double x = 0;
  std::string label;
  std::string color;
};

struct Chart {
  std::string title;  // for screen readers (aria-label)
  std::string x_label, y_label;
  std::vector<ChartSeries> series;
  std::vector<ChartMarker> vertical_lines;
  // Same range on both axes and a dashed y = x line (predicted against
  // measured).
  bool diagonal = false;
  // A vertical line further right than this many times the largest x of the
  // points is not drawn to scale (it would squeeze the points against the
  // y axis): a note at the plot's right edge names it instead. 0: no limit.
  double marker_stretch_limit = 0;
  int width = 600, height = 380;
};

// The chart as an <svg> element with a legend; axes start at 0 (every value
// the report plots is non-negative). A chart with no points still draws its
// axes.
std::string SvgChart(const Chart& chart);

}  // namespace autoaccel

#endif  // AUTOACCEL_REPORT_SVG_CHART_H_

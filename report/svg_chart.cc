#include "report/svg_chart.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace autoaccel {
namespace {

constexpr double kLeft = 72, kRight = 24, kTop = 40, kBottom = 52;

// A round step (1, 2 or 5 times a power of ten) giving about five ticks up
// to `max`.
double TickStep(double max) {
  const double raw = max / 5;
  const double magnitude = std::pow(10.0, std::floor(std::log10(raw)));
  for (double m : {1.0, 2.0, 5.0}) {
    if (m * magnitude >= raw) return m * magnitude;
  }
  return 10 * magnitude;
}

std::string TickLabel(double v) {
  if (v == 0) return "0";
  if (std::abs(v) >= 1000) return absl::StrFormat("%.0f", v);
  return absl::StrFormat("%.4g", v);
}

std::string Num(double v) { return absl::StrFormat("%.1f", v); }

struct Scale {
  double x_max = 1, y_max = 1;
  double width = 0, height = 0;
  double X(double x) const { return kLeft + x / x_max * (width - kLeft - kRight); }
  double Y(double y) const { return height - kBottom - y / y_max * (height - kTop - kBottom); }
};

// The axis' end: a whole number of ticks covering `max` (1 when empty).
double AxisMax(double max) {
  if (!(max > 0) || !std::isfinite(max)) return 1;
  const double step = TickStep(max);
  return std::ceil(max / step - 1e-9) * step;
}

}  // namespace

std::string HtmlEscape(absl::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

std::string SvgChart(const Chart& chart) {
  double x_max = 0, y_max = 0;
  for (const ChartSeries& s : chart.series) {
    for (const ChartPoint& p : s.points) {
      x_max = std::max(x_max, p.x);
      y_max = std::max(y_max, p.y);
    }
  }
  std::vector<ChartMarker> to_scale, off_scale;
  for (const ChartMarker& m : chart.vertical_lines) {
    const bool off =
        chart.marker_stretch_limit > 0 && x_max > 0 && m.x > x_max * chart.marker_stretch_limit;
    (off ? off_scale : to_scale).push_back(m);
  }
  for (const ChartMarker& m : to_scale) x_max = std::max(x_max, m.x);
  if (chart.diagonal) x_max = y_max = std::max(x_max, y_max);
  Scale sc;
  sc.x_max = AxisMax(x_max);
  sc.y_max = AxisMax(y_max);
  sc.width = chart.width;
  sc.height = chart.height;

  std::string svg = absl::StrFormat(
      "<svg class=\"chart\" role=\"img\" aria-label=\"%s\" viewBox=\"0 0 %d %d\" "
      "xmlns=\"http://www.w3.org/2000/svg\">\n",
      HtmlEscape(chart.title), chart.width, chart.height);
  // Grid, ticks and tick labels.
  const double x_step = TickStep(sc.x_max), y_step = TickStep(sc.y_max);
  for (double v = 0; v <= sc.x_max * (1 + 1e-9); v += x_step) {
    absl::StrAppend(&svg, "<line class=\"grid\" x1=\"", Num(sc.X(v)), "\" y1=\"", Num(sc.Y(0)),
                    "\" x2=\"", Num(sc.X(v)), "\" y2=\"", Num(sc.Y(sc.y_max)), "\"/>",
                    "<text class=\"tick\" x=\"", Num(sc.X(v)), "\" y=\"", Num(sc.Y(0) + 16),
                    "\" text-anchor=\"middle\">", TickLabel(v), "</text>\n");
  }
  for (double v = 0; v <= sc.y_max * (1 + 1e-9); v += y_step) {
    absl::StrAppend(&svg, "<line class=\"grid\" x1=\"", Num(sc.X(0)), "\" y1=\"", Num(sc.Y(v)),
                    "\" x2=\"", Num(sc.X(sc.x_max)), "\" y2=\"", Num(sc.Y(v)), "\"/>",
                    "<text class=\"tick\" x=\"", Num(sc.X(0) - 6), "\" y=\"", Num(sc.Y(v) + 4),
                    "\" text-anchor=\"end\">", TickLabel(v), "</text>\n");
  }
  absl::StrAppend(&svg, "<line class=\"axis\" x1=\"", Num(sc.X(0)), "\" y1=\"", Num(sc.Y(0)),
                  "\" x2=\"", Num(sc.X(sc.x_max)), "\" y2=\"", Num(sc.Y(0)), "\"/>",
                  "<line class=\"axis\" x1=\"", Num(sc.X(0)), "\" y1=\"", Num(sc.Y(0)), "\" x2=\"",
                  Num(sc.X(0)), "\" y2=\"", Num(sc.Y(sc.y_max)), "\"/>\n");
  absl::StrAppend(&svg, "<text class=\"axis-label\" x=\"", Num((sc.X(0) + sc.X(sc.x_max)) / 2),
                  "\" y=\"", Num(chart.height - 12.0), "\" text-anchor=\"middle\">",
                  HtmlEscape(chart.x_label), "</text>\n");
  const double y_mid = (sc.Y(0) + sc.Y(sc.y_max)) / 2;
  absl::StrAppend(&svg, "<text class=\"axis-label\" x=\"16\" y=\"", Num(y_mid),
                  "\" text-anchor=\"middle\" transform=\"rotate(-90 16 ", Num(y_mid), ")\">",
                  HtmlEscape(chart.y_label), "</text>\n");

  if (chart.diagonal) {
    absl::StrAppend(&svg, "<line class=\"diagonal\" x1=\"", Num(sc.X(0)), "\" y1=\"", Num(sc.Y(0)),
                    "\" x2=\"", Num(sc.X(sc.x_max)), "\" y2=\"", Num(sc.Y(sc.y_max)),
                    "\"><title>predicted = measured</title></line>\n");
  }
  for (const ChartMarker& m : to_scale) {
    absl::StrAppend(&svg, "<line class=\"marker\" stroke=\"", HtmlEscape(m.color), "\" x1=\"",
                    Num(sc.X(m.x)), "\" y1=\"", Num(sc.Y(0)), "\" x2=\"", Num(sc.X(m.x)),
                    "\" y2=\"", Num(sc.Y(sc.y_max)), "\"><title>", HtmlEscape(m.label),
                    "</title></line>\n");
  }
  for (const ChartSeries& s : chart.series) {
    const std::string color = HtmlEscape(s.color);
    if (s.style != ChartSeries::Style::kDots && !s.points.empty()) {
      std::string path;
      for (size_t i = 0; i < s.points.size(); ++i) {
        const ChartPoint& p = s.points[i];
        if (i == 0) {
          absl::StrAppend(&path, "M", Num(sc.X(p.x)), " ", Num(sc.Y(p.y)));
        } else if (s.style == ChartSeries::Style::kStep) {
          absl::StrAppend(&path, " H", Num(sc.X(p.x)), " V", Num(sc.Y(p.y)));
        } else {
          absl::StrAppend(&path, " L", Num(sc.X(p.x)), " ", Num(sc.Y(p.y)));
        }
      }
      if (s.extend_to_right) absl::StrAppend(&path, " H", Num(sc.X(sc.x_max)));
      absl::StrAppend(&svg, "<path class=\"series-line\" stroke=\"", color, "\" d=\"", path,
                      "\"/>\n");
    }
    // A line's points are rings, so they mark dots of another series they
    // pass through rather than hiding them.
    const bool dots = s.style == ChartSeries::Style::kDots;
    for (const ChartPoint& p : s.points) {
      absl::StrAppend(&svg,
                      dots ? "<circle class=\"dot\" fill=\"" : "<circle class=\"ring\" stroke=\"",
                      color, "\" cx=\"", Num(sc.X(p.x)), "\" cy=\"", Num(sc.Y(p.y)), "\" r=\"",
                      dots ? "4.5" : "7", "\">");
      if (!p.tooltip.empty()) absl::StrAppend(&svg, "<title>", HtmlEscape(p.tooltip), "</title>");
      absl::StrAppend(&svg, "</circle>\n");
    }
  }
  // The legend, along the top.
  double lx = kLeft;
  auto legend = [&](const std::string& name, const std::string& color, bool line) {
    const std::string c = HtmlEscape(color);
    if (line) {
      absl::StrAppend(&svg, "<line stroke=\"", c, "\" stroke-width=\"2.5\" x1=\"", Num(lx),
                      "\" y1=\"16\" x2=\"", Num(lx + 16), "\" y2=\"16\"/>");
    } else {
      absl::StrAppend(&svg, "<circle fill=\"", c, "\" cx=\"", Num(lx + 8),
                      "\" cy=\"16\" r=\"4.5\"/>");
    }
    absl::StrAppend(&svg, "<text class=\"legend\" x=\"", Num(lx + 22), "\" y=\"20\">",
                    HtmlEscape(name), "</text>\n");
    lx += 34 + 6.5 * name.size();
  };
  for (const ChartSeries& s : chart.series) {
    if (!s.name.empty()) legend(s.name, s.color, s.style != ChartSeries::Style::kDots);
  }
  for (const ChartMarker& m : to_scale) legend(m.label, m.color, true);
  double note_y = sc.Y(sc.y_max) + 14;
  for (const ChartMarker& m : off_scale) {
    absl::StrAppend(&svg, "<text class=\"offscale\" fill=\"", HtmlEscape(m.color), "\" x=\"",
                    Num(sc.X(sc.x_max) - 4), "\" y=\"", Num(note_y), "\" text-anchor=\"end\">",
                    HtmlEscape(m.label), ": off the scale, further right \u2192</text>\n");
    note_y += 16;
  }
  svg += "</svg>\n";
  return svg;
}

}  // namespace autoaccel

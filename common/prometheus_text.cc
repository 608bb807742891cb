#include "common/prometheus_text.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdlib>

#include "absl/strings/str_cat.h"

namespace autoaccel {
namespace {

bool ValidMetricName(absl::string_view name) {
  if (name.empty()) return false;
  for (size_t i = 0; i < name.size(); ++i) {
    const char c = name[i];
    const bool letter = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == ':';
    if (!letter && !(i > 0 && c >= '0' && c <= '9')) return false;
  }
  return true;
}

absl::string_view TypeName(MetricType type) {
  switch (type) {
    case MetricType::kCounter:
      return "counter";
    case MetricType::kGauge:
      return "gauge";
    case MetricType::kHistogram:
      return "histogram";
  }
  return "untyped";
}

// Backslash and newline escaped, and with `quotes` the double quote (HELP
// text leaves it as it is; a label value escapes it).
std::string Escape(absl::string_view text, bool quotes) {
  std::string out;
  out.reserve(text.size());
  for (const char c : text) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '"' && quotes) {
      out += "\\\"";
    } else {
      out.push_back(c);
    }
  }
  return out;
}

void AppendLabels(const MetricLabels& labels, std::string* out) {
  if (labels.empty()) return;
  out->push_back('{');
  for (size_t i = 0; i < labels.size(); ++i) {
    if (i > 0) out->push_back(',');
    absl::StrAppend(out, labels[i].first, "=\"", EscapeLabelValue(labels[i].second), "\"");
  }
  out->push_back('}');
}

}  // namespace

Histogram::Histogram(std::vector<double> upper_bounds)
    : upper_bounds_(std::move(upper_bounds)), counts_(upper_bounds_.size() + 1, 0) {}

void Histogram::Observe(double value) {
  // The first bucket whose upper bound is >= value ("le": less or equal).
  const size_t i =
      std::lower_bound(upper_bounds_.begin(), upper_bounds_.end(), value) - upper_bounds_.begin();
  ++counts_[i];
  sum_ += value;
  ++count_;
}

std::string FormatMetricValue(double value) {
  if (std::isnan(value)) return "NaN";
  if (std::isinf(value)) return value > 0 ? "+Inf" : "-Inf";
  if (value == std::trunc(value) && std::fabs(value) < 9007199254740992.0) {
    return absl::StrCat(static_cast<int64_t>(value));
  }
  char buf[64];
  // Shortest text that reads back as the same double.
  const auto [end, ec] = std::to_chars(buf, buf + sizeof(buf), value);
  return std::string(buf, ec == std::errc() ? end : buf);
}

std::string EscapeLabelValue(absl::string_view value) { return Escape(value, /*quotes=*/true); }

void PrometheusText::Family(absl::string_view name, MetricType type, absl::string_view help) {
  if (!ValidMetricName(name)) std::abort();  // a programming error: names are constants
  absl::StrAppend(&text_, "# HELP ", name, " ", Escape(help, /*quotes=*/false), "\n# TYPE ", name,
                  " ", TypeName(type), "\n");
}

void PrometheusText::Sample(absl::string_view name, const MetricLabels& labels, double value) {
  absl::StrAppend(&text_, name);
  AppendLabels(labels, &text_);
  absl::StrAppend(&text_, " ", FormatMetricValue(value), "\n");
}

void PrometheusText::HistogramSamples(absl::string_view name, const MetricLabels& labels,
                                      const Histogram& h) {
  const std::string bucket = absl::StrCat(name, "_bucket");
  MetricLabels with_le = labels;
  with_le.emplace_back("le", "");
  uint64_t cumulative = 0;
  for (size_t i = 0; i <= h.upper_bounds().size(); ++i) {
    cumulative += h.counts()[i];
    with_le.back().second =
        i < h.upper_bounds().size() ? FormatMetricValue(h.upper_bounds()[i]) : "+Inf";
    Sample(bucket, with_le, static_cast<double>(cumulative));
  }
  Sample(absl::StrCat(name, "_sum"), labels, h.sum());
  Sample(absl::StrCat(name, "_count"), labels, static_cast<double>(h.count()));
}

}  // namespace autoaccel

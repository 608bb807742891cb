// Prometheus's text exposition format (version 0.0.4, what a scrape of
// /metrics reads): metric families with their HELP and TYPE lines, samples
// with escaped label values, and a cumulative histogram value type.
//
// Pure: no I/O, no locking. A PrometheusText is written by one thread; a
// Histogram is a value the caller guards.
#ifndef AUTOACCEL_COMMON_PROMETHEUS_TEXT_H_
#define AUTOACCEL_COMMON_PROMETHEUS_TEXT_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/string_view.h"

namespace autoaccel {

// The Content-Type a scrape is answered with.
inline constexpr absl::string_view kPrometheusContentType =
    "text/plain; version=0.0.4; charset=utf-8";

// Label name -> value, in the order they are written.
using MetricLabels = std::vector<std::pair<std::string, std::string>>;

enum class MetricType { kCounter, kGauge, kHistogram };

// A histogram's buckets and observations: counts per upper bound, their sum
// and total, written cumulatively with a final +Inf bucket.
class Histogram {
 public:
  // `upper_bounds` strictly increasing, finite (the +Inf bucket is implied).
  explicit Histogram(std::vector<double> upper_bounds);
  void Observe(double value);
  const std::vector<double>& upper_bounds() const { return upper_bounds_; }
  // Observations <= upper_bounds()[i], not cumulative; one more for +Inf.
  const std::vector<uint64_t>& counts() const { return counts_; }
  double sum() const { return sum_; }
  uint64_t count() const { return count_; }

 private:
  std::vector<double> upper_bounds_;
  std::vector<uint64_t> counts_;
  double sum_ = 0;
  uint64_t count_ = 0;
};

// Builds one exposition: each family's HELP and TYPE, then its samples.
// Families must be written whole, one after another (the format wants a
// family's samples together), and each name once.
class PrometheusText {
 public:
  // Starts a family. `name` must be a valid metric name ([a-zA-Z_:][a-zA-Z0-9_:]*);
  // `help` is escaped (backslash, newline).
  void Family(absl::string_view name, MetricType type, absl::string_view help);
  // One sample of the current family: `name` is the family's own, or for a
  // histogram family the family's name plus _bucket, _sum or _count.
  // Label values are escaped (backslash, double quote, newline); values are
  // written as Go's strconv would (+Inf, -Inf, NaN, integers without an
  // exponent up to 2^53).
  void Sample(absl::string_view name, const MetricLabels& labels, double value);
  // A histogram's _bucket (with an "le" label after `labels`), _sum and
  // _count samples under the current family `name`.
  void HistogramSamples(absl::string_view name, const MetricLabels& labels, const Histogram& h);

  const std::string& text() const { return text_; }

 private:
  std::string text_;
};

// A value as the exposition writes it: "+Inf", "-Inf", "NaN", "42", "0.25".
std::string FormatMetricValue(double value);
// A label value with backslash, double quote and newline escaped.
std::string EscapeLabelValue(absl::string_view value);

}  // namespace autoaccel

#endif  // AUTOACCEL_COMMON_PROMETHEUS_TEXT_H_

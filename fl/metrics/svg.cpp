// curves.svg: acc (blue, solid) and asr (red, dashed; only when some run measured it) over rounds, and
// for personalised runs the mean over clients of their own models, p_acc (green) and p_asr (orange).
// One run: one thick line per metric. Several runs (seeds): a thin, faint line per run and a thick
// line for the mean over the runs that measured the metric at that round.
// overlay_svg (`bastion plot`) draws one metric of several runs, one colour each, on the same axes.
// Self-contained SVG 1.1 (no scripts, fonts or CSS files), so a browser shows it as is. A NaN value
// (a round where the metric was not measured) breaks the line: joining across it would draw values
// that were never measured. Values are fractions; the y axis labels them in percent.
#include <algorithm>
#include <charconv>
#include <cmath>
#include <map>

#include "fl/metrics/results.h"
#include "tensor/error.h"

namespace bastion {

std::string xml_escape(const std::string& text) {
  std::string out;
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
        out += "&apos;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

namespace {

constexpr double kWidth = 720, kHeight = 420;
constexpr double kLeft = 64, kRight = 24, kTop = 56, kBottom = 52;  // margins around the plot area
constexpr double kPlotWidth = kWidth - kLeft - kRight, kPlotHeight = kHeight - kTop - kBottom;
constexpr const char* kAccColor = "#1f77b4";  // matplotlib's default blue and red: familiar to readers
constexpr const char* kAsrColor = "#d62728";
constexpr const char* kPersonalAccColor = "#2ca02c";
constexpr const char* kPersonalAsrColor = "#ff7f0e";
constexpr const char* kGridColor = "#e6e6e6";
constexpr const char* kAxisColor = "#333333";

using Point = std::pair<double, double>;  // (round, value); value may be NaN
using Series = std::vector<Point>;

// One decimal is a tenth of a pixel: finer digits only make the file larger.
std::string num(double value) {
  char buffer[64];
  const auto [end, error] = std::to_chars(buffer, buffer + sizeof buffer, value, std::chars_format::fixed, 1);
  BASTION_ASSERT(error == std::errc());
  return std::string(buffer, end);
}

// The x axis: rounds from `low` to `high`, ticks every `step` (1, 2 or 5 times a power of ten, at least
// one round), both ends widened to a tick so the axis starts and ends on a label.
struct RoundAxis {
  double low = 0, high = 1, step = 1;
  double x(double round) const { return kLeft + (round - low) / (high - low) * kPlotWidth; }
};

RoundAxis round_axis(const std::vector<std::vector<RoundRecord>>& runs) {
  double low = INFINITY, high = -INFINITY;
  for (const auto& records : runs)
    for (const RoundRecord& r : records) {
      low = std::min(low, static_cast<double>(r.round));
      high = std::max(high, static_cast<double>(r.round));
    }
  if (low > high) low = 0, high = 1;  // no records: an empty frame
  if (high == low) high = low + 1;
  const double raw_step = (high - low) / 8;  // about 5 to 10 labels fit 630 pixels comfortably
  const double magnitude = std::pow(10.0, std::floor(std::log10(raw_step)));
  double step = 10 * magnitude;
  for (double factor : {5.0, 2.0, 1.0})
    if (factor * magnitude >= raw_step) step = factor * magnitude;
  step = std::max(step, 1.0);
  return RoundAxis{std::floor(low / step) * step, std::ceil(high / step) * step, step};
}

// Values are fractions by definition; clamping keeps a corrupt value from drawing over the labels.
double value_y(double value) { return kTop + (1 - std::clamp(value, 0.0, 1.0)) * kPlotHeight; }

void append_grid_and_axes(std::string& out, const RoundAxis& axis) {
  const std::string bottom = num(kTop + kPlotHeight), right = num(kLeft + kPlotWidth);
  for (int i = 0; i <= 10; ++i) {
    const std::string y = num(value_y(i / 10.0));
    out += "<line x1=\"" + num(kLeft) + "\" y1=\"" + y + "\" x2=\"" + right + "\" y2=\"" + y + "\" stroke=\"" +
           kGridColor + "\"/>\n";
    out += "<text x=\"" + num(kLeft - 8) + "\" y=\"" + y + "\" dy=\"0.35em\" text-anchor=\"end\">" +
           std::to_string(i * 10) + "%</text>\n";
  }
  const int64_t ticks = std::llround((axis.high - axis.low) / axis.step);
  for (int64_t i = 0; i <= ticks; ++i) {
    const double round = axis.low + static_cast<double>(i) * axis.step;
    const std::string x = num(axis.x(round));
    out += "<line x1=\"" + x + "\" y1=\"" + num(kTop) + "\" x2=\"" + x + "\" y2=\"" + num(kTop + kPlotHeight + 5) +
           "\" stroke=\"" + kGridColor + "\"/>\n";
    out += "<text x=\"" + x + "\" y=\"" + num(kTop + kPlotHeight + 20) + "\" text-anchor=\"middle\">" +
           std::to_string(std::llround(round)) + "</text>\n";
  }
  out += "<path d=\"M" + num(kLeft) + " " + num(kTop) + " V" + bottom + " H" + right + "\" fill=\"none\" stroke=\"" +
         kAxisColor + "\"/>\n";
  out += "<text x=\"" + num(kLeft + kPlotWidth / 2) + "\" y=\"" + num(kHeight - 10) +
         "\" text-anchor=\"middle\">round</text>\n";
}

struct LineStyle {
  const char* color;
  bool dashed;
  double width, opacity;
};

std::string stroke_attributes(const LineStyle& style) {
  std::string attributes = "stroke=\"" + std::string(style.color) + "\" stroke-width=\"" + num(style.width) +
                           "\" stroke-opacity=\"" + num(style.opacity) + "\" stroke-linejoin=\"round\"";
  if (style.dashed) attributes += " stroke-dasharray=\"6 4\"";
  return attributes;
}

// One polyline per run of non-NaN points; a lone point (one round between gaps, or a one-round run)
// would be an invisible zero-length line, so it is drawn as a dot.
void append_series(std::string& out, const Series& series, const LineStyle& style, const RoundAxis& axis) {
  std::vector<Point> segment;
  const auto flush = [&] {
    if (segment.size() == 1) {
      out += "<circle cx=\"" + num(segment[0].first) + "\" cy=\"" + num(segment[0].second) + "\" r=\"" +
             num(style.width + 1) + "\" fill=\"" + style.color + "\" fill-opacity=\"" + num(style.opacity) + "\"/>\n";
    } else if (segment.size() > 1) {
      out += "<polyline fill=\"none\" " + stroke_attributes(style) + " points=\"";
      for (size_t i = 0; i < segment.size(); ++i) {
        if (i > 0) out += ' ';
        out += num(segment[i].first) + "," + num(segment[i].second);
      }
      out += "\"/>\n";
    }
    segment.clear();
  };
  for (const auto& [round, value] : series) {
    if (std::isnan(value))
      flush();
    else
      segment.emplace_back(axis.x(round), value_y(value));
  }
  flush();
}

// A plotted figure of a round record.
using Metric = double (*)(const RoundRecord&);
double global_acc(const RoundRecord& r) { return r.acc; }
double global_asr(const RoundRecord& r) { return r.asr; }
double personal_acc(const RoundRecord& r) { return r.personal.present ? r.personal.acc.mean : kNoValue; }
double personal_asr(const RoundRecord& r) { return r.personal.present ? r.personal.asr.mean : kNoValue; }

Series run_series(const std::vector<RoundRecord>& records, Metric metric) {
  Series series;
  for (const RoundRecord& r : records) series.emplace_back(static_cast<double>(r.round), metric(r));
  return series;
}

// Per round, the mean over the runs that measured the metric there (runs may stop at different
// rounds, or evaluate different rounds); NaN where none did.
Series mean_series(const std::vector<std::vector<RoundRecord>>& runs, Metric metric) {
  std::map<int64_t, std::vector<double>> by_round;
  for (const auto& records : runs)
    for (const RoundRecord& r : records) by_round[r.round].push_back(metric(r));
  Series series;
  for (const auto& [round, values] : by_round) series.emplace_back(static_cast<double>(round), mean_std(values).mean);
  return series;
}

struct Curve {
  const char* label;
  Metric metric;
  const char* color;
  bool dashed;
};

// The curves with at least one measured value, in legend order.
std::vector<Curve> measured_curves(const std::vector<std::vector<RoundRecord>>& runs) {
  std::vector<Curve> curves;
  for (const Curve& curve : {Curve{"acc", global_acc, kAccColor, false}, Curve{"asr", global_asr, kAsrColor, true},
                             Curve{"p_acc", personal_acc, kPersonalAccColor, false},
                             Curve{"p_asr", personal_asr, kPersonalAsrColor, true}}) {
    bool measured = curve.metric == global_acc;  // acc is always drawn
    for (const auto& records : runs)
      for (const RoundRecord& r : records) measured = measured || !std::isnan(curve.metric(r));
    if (measured) curves.push_back(curve);
  }
  return curves;
}

void append_legend(std::string& out, const std::vector<Curve>& curves, size_t run_count) {
  const std::string y = num(kTop - 14);
  double x = kLeft;
  for (const Curve& curve : curves) {
    out += "<line x1=\"" + num(x) + "\" y1=\"" + y + "\" x2=\"" + num(x + 28) + "\" y2=\"" + y + "\" " +
           stroke_attributes({curve.color, curve.dashed, 2, 1}) + "/>\n";
    out += "<text x=\"" + num(x + 34) + "\" y=\"" + y + "\" dy=\"0.35em\">" + curve.label + "</text>\n";
    x += 90;
  }
  if (run_count > 1)
    out += "<text x=\"" + num(x) + "\" y=\"" + y + "\" dy=\"0.35em\" fill=\"#666666\">thin: each of " +
           std::to_string(run_count) + " runs; thick: mean over runs</text>\n";
}

// The document's start, its <title> and a white background: a transparent SVG is unreadable in a
// browser's dark mode.
std::string svg_header(const std::string& escaped_title) {
  std::string out = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
  out += "<svg xmlns=\"http://www.w3.org/2000/svg\" version=\"1.1\" width=\"" + num(kWidth) + "\" height=\"" +
         num(kHeight) + "\" viewBox=\"0 0 " + num(kWidth) + " " + num(kHeight) +
         "\" font-family=\"Helvetica, Arial, sans-serif\" font-size=\"12\" fill=\"#222222\">\n";
  out += "<title>" + escaped_title + "</title>\n";
  return out + "<rect width=\"100%\" height=\"100%\" fill=\"#ffffff\"/>\n";
}

// Ten colours that stay apart (matplotlib's tab10); an eleventh run reuses the first.
constexpr const char* kRunColors[] = {"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd",
                                      "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"};

struct NamedMetric {
  const char* name;
  Metric metric;
};

const std::vector<NamedMetric>& named_metrics() {
  static const std::vector<NamedMetric> metrics = {
      {"acc", global_acc},
      {"asr", global_asr},
      {"local_acc", [](const RoundRecord& r) { return r.local_acc; }},
      {"p_acc", personal_acc},
      {"p_acc_w", [](const RoundRecord& r) { return r.personal.present ? r.personal.acc.weighted : kNoValue; }},
      {"p_asr", personal_asr},
      {"p_gacc", [](const RoundRecord& r) { return r.personal.present ? r.personal.global_acc.mean : kNoValue; }},
      {"p_racc", [](const RoundRecord& r) { return r.personal.received ? r.personal.received_acc.mean : kNoValue; }},
      {"p_racc_w",
       [](const RoundRecord& r) { return r.personal.received ? r.personal.received_acc.weighted : kNoValue; }},
  };
  return metrics;
}

constexpr double kLegendLine = 16, kLegendWidth = 214;

// How many of the curves' points fall in the legend's box at the plot's right, at its top or its bottom.
size_t points_under_legend(const std::vector<Series>& curves, const RoundAxis& axis, size_t lines, bool bottom) {
  const double height = kLegendLine * static_cast<double>(lines) + 8;
  const double top = bottom ? kTop + kPlotHeight - height - 4 : kTop + 2, left = kLeft + kPlotWidth - kLegendWidth - 6;
  size_t count = 0;
  for (const Series& series : curves)
    for (const auto& [round, value] : series)
      if (!std::isnan(value) && axis.x(round) >= left && value_y(value) >= top && value_y(value) <= top + height)
        ++count;
  return count;
}

// The legend: one line per run at the plot's right, on a white box so curves do not cross the text; at
// the top, or at the bottom when fewer of the curves' points lie there (accuracy curves end near 100 %,
// where a top legend hid them).
void append_run_legend(std::string& out, const std::vector<LabelledRuns>& runs, const std::vector<Series>& curves,
                       const RoundAxis& axis) {
  const bool bottom =
      points_under_legend(curves, axis, runs.size(), true) < points_under_legend(curves, axis, runs.size(), false);
  const double line_height = kLegendLine, x = kLeft + kPlotWidth - kLegendWidth + 4;
  const double y0 = bottom ? kTop + kPlotHeight - line_height * static_cast<double>(runs.size()) - 6 : kTop + 8;
  out += "<rect x=\"" + num(x - 6) + "\" y=\"" + num(y0 - 6) + "\" width=\"" + num(kLegendWidth) + "\" height=\"" +
         num(line_height * static_cast<double>(runs.size()) + 8) + "\" fill=\"#ffffff\" fill-opacity=\"0.85\"/>\n";
  for (size_t i = 0; i < runs.size(); ++i) {
    const std::string y = num(y0 + line_height * static_cast<double>(i) + 4);
    const char* color = kRunColors[i % std::size(kRunColors)];
    out += "<line x1=\"" + num(x) + "\" y1=\"" + y + "\" x2=\"" + num(x + 24) + "\" y2=\"" + y + "\" " +
           stroke_attributes({color, false, 2, 1}) + "/>\n";
    std::string label = runs[i].label;
    if (runs[i].seeds.size() > 1) label += " (mean of " + std::to_string(runs[i].seeds.size()) + " seeds)";
    out += "<text x=\"" + num(x + 30) + "\" y=\"" + y + "\" dy=\"0.35em\">" + xml_escape(label) + "</text>\n";
  }
}

}  // namespace

const std::vector<std::string>& overlay_metrics() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> n;
    for (const NamedMetric& m : named_metrics()) n.push_back(m.name);
    return n;
  }();
  return names;
}

bool overlay_metric_measured(const std::vector<std::vector<RoundRecord>>& seeds, const std::string& metric) {
  const auto& metrics = named_metrics();
  const auto found =
      std::find_if(metrics.begin(), metrics.end(), [&](const NamedMetric& m) { return metric == m.name; });
  if (found == metrics.end()) return false;
  for (const auto& records : seeds)
    for (const RoundRecord& r : records)
      if (!std::isnan(found->metric(r))) return true;
  return false;
}

std::string overlay_svg(const std::string& title, const std::string& metric_name,
                        const std::vector<LabelledRuns>& runs) {
  const auto& metrics = named_metrics();
  const auto found =
      std::find_if(metrics.begin(), metrics.end(), [&](const NamedMetric& m) { return metric_name == m.name; });
  std::string valid;
  for (const NamedMetric& m : metrics) valid += std::string(valid.empty() ? "" : ", ") + m.name;
  BASTION_CHECK(found != metrics.end(), "no metric '", metric_name, "' to plot; valid: ", valid);
  std::vector<std::vector<RoundRecord>> all;
  for (const LabelledRuns& run : runs) all.insert(all.end(), run.seeds.begin(), run.seeds.end());
  const RoundAxis axis = round_axis(all);
  const std::string escaped_title = xml_escape(title);
  std::string out = svg_header(escaped_title);
  append_grid_and_axes(out, axis);
  std::vector<Series> curves;
  for (size_t i = 0; i < runs.size(); ++i) {
    const char* color = kRunColors[i % std::size(kRunColors)];
    if (runs[i].seeds.size() > 1)
      for (const auto& records : runs[i].seeds)
        append_series(out, run_series(records, found->metric), {color, false, 1, 0.3}, axis);
    curves.push_back(mean_series(runs[i].seeds, found->metric));
    append_series(out, curves.back(), {color, false, 2, 1}, axis);
  }
  append_run_legend(out, runs, curves, axis);
  out += "<text x=\"" + num(kLeft) + "\" y=\"22\" font-size=\"15\" font-weight=\"bold\">" + escaped_title + "</text>\n";
  out += "<text x=\"" + num(kLeft) + "\" y=\"40\" fill=\"#666666\">" + metric_name + "</text>\n";
  return out + "</svg>\n";
}

std::string curves_svg(const std::string& title, const std::vector<std::vector<RoundRecord>>& runs) {
  const std::vector<Curve> curves = measured_curves(runs);
  const RoundAxis axis = round_axis(runs);
  const std::string escaped_title = xml_escape(title);
  std::string out = svg_header(escaped_title);
  append_grid_and_axes(out, axis);
  const bool several = runs.size() > 1;
  for (const auto& records : runs)
    for (const Curve& curve : curves) {
      const LineStyle style =
          several ? LineStyle{curve.color, curve.dashed, 1, 0.3} : LineStyle{curve.color, curve.dashed, 2, 1};
      append_series(out, run_series(records, curve.metric), style, axis);
    }
  if (several)
    for (const Curve& curve : curves)
      append_series(out, mean_series(runs, curve.metric), {curve.color, curve.dashed, 2, 1}, axis);
  append_legend(out, curves, runs.size());
  out += "<text x=\"" + num(kLeft) + "\" y=\"22\" font-size=\"15\" font-weight=\"bold\">" + escaped_title + "</text>\n";
  out += "</svg>\n";
  return out;
}

}  // namespace bastion

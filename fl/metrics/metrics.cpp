// Metrics of a federated run (SPEC §4): detection rates, the reported figure of a column (last, last:K,
// best), mean ± sample std over seeds, round-to-accuracy. Pure functions over plain numbers; NaN means
// "does not apply" and is skipped wherever values are combined, so a run without a backdoor attack
// (asr = NaN in every round) reports asr = NaN rather than 0.
#include "fl/metrics/metrics.h"

#include <algorithm>
#include <charconv>

#include "tensor/error.h"

namespace bastion {

namespace {

// NaN rather than 0/0 (which would also be NaN, but only by accident of IEEE arithmetic): a rate over
// no clients does not exist, and the files write it as an empty cell / null.
double ratio_or_nan(int64_t numerator, int64_t denominator) {
  return denominator == 0 ? kNoValue : static_cast<double>(numerator) / static_cast<double>(denominator);
}

std::vector<double> without_nan(const std::vector<double>& values) {
  std::vector<double> kept;
  kept.reserve(values.size());
  for (double v : values)
    if (!std::isnan(v)) kept.push_back(v);
  return kept;
}

}  // namespace

DetectionRates detection_rates(int64_t tp, int64_t fp, int64_t tn, int64_t fn) {
  BASTION_CHECK(tp >= 0 && fp >= 0 && tn >= 0 && fn >= 0, "detection counts must be >= 0, got tp=", tp, " fp=", fp,
                " tn=", tn, " fn=", fn);
  DetectionRates rates;
  rates.dacc = ratio_or_nan(tp + tn, tp + fp + tn + fn);
  rates.fpr = ratio_or_nan(fp, fp + tn);  // benign clients = those flagged (FP) + those kept (TN)
  rates.fnr = ratio_or_nan(fn, fn + tp);  // malicious clients = those missed (FN) + those caught (TP)
  return rates;
}

void record_verdicts(std::vector<uint8_t>& latest, std::span<const int64_t> clients, std::span<const uint8_t> flagged) {
  BASTION_CHECK(flagged.empty() || flagged.size() == clients.size(), "record_verdicts: ", flagged.size(),
                " verdicts for ", clients.size(), " clients");
  for (size_t i = 0; i < clients.size(); ++i) {
    BASTION_CHECK(clients[i] >= 0 && clients[i] < static_cast<int64_t>(latest.size()), "record_verdicts: client ",
                  clients[i], " outside [0, ", latest.size(), ")");
    latest[static_cast<size_t>(clients[i])] = flagged.empty() ? 0 : (flagged[i] != 0);
  }
}

DetectionRates client_detection_rates(const std::vector<uint8_t>& latest, const std::vector<uint8_t>& malicious) {
  BASTION_CHECK(latest.size() == malicious.size(), "client_detection_rates: ", latest.size(), " verdicts for ",
                malicious.size(), " clients");
  int64_t tp = 0, fp = 0, tn = 0, fn = 0;
  for (size_t c = 0; c < latest.size(); ++c) {
    const bool truth = malicious[c] != 0, flagged = latest[c] != 0;
    tp += truth && flagged, fp += !truth && flagged, tn += !truth && !flagged, fn += truth && !flagged;
  }
  return detection_rates(tp, fp, tn, fn);
}

ReportMode parse_report_mode(const std::string& text) {
  ReportMode mode;
  if (text == "last") return mode;
  if (text == "best") {
    mode.kind = ReportMode::Best;
    return mode;
  }
  const std::string prefix = "last:";
  if (text.starts_with(prefix)) {
    const char* first = text.data() + prefix.size();
    const char* last = text.data() + text.size();
    int64_t k = 0;
    const auto [end, error] = std::from_chars(first, last, k);
    // The whole rest must be the number: "last:5x" and "last:" are typos, not "last:5" / "last".
    if (error == std::errc() && end == last && first != last && k >= 1) {
      mode.kind = ReportMode::LastMean;
      mode.k = k;
      return mode;
    }
  }
  BASTION_FAIL("unknown report mode '", text, "': expected 'last', 'best' or 'last:K' with an integer K >= 1");
}

// "last" is the latest measured value (a NaN row, a round where the metric was not measured, is skipped).
// "last:K" is the mean of the values measured in the last K *rounds* of the run, rounds R - K + 1 .. R with
// R the last recorded round: with eval.every = 5, "last:10" averages the evaluations of rounds R - 5 and R.
// Counting rounds rather than evaluations keeps SPMC's "mean of the last 5 rounds" and FedCPA's "last 10"
// the papers' figures whatever eval.every is (docs/decisions.md "eval.report last:K").
double reported_value(const std::vector<double>& column, const std::vector<int64_t>& rounds, const ReportMode& mode) {
  BASTION_CHECK(column.size() == rounds.size(), "reported_value: ", column.size(), " values but ", rounds.size(),
                " round numbers");
  BASTION_CHECK(std::is_sorted(rounds.begin(), rounds.end()), "reported_value: round numbers must not decrease");
  const std::vector<double> values = without_nan(column);
  if (values.empty()) return kNoValue;
  switch (mode.kind) {
    case ReportMode::Last:
      return values.back();
    case ReportMode::Best:
      return *std::max_element(values.begin(), values.end());
    case ReportMode::LastMean: {
      BASTION_CHECK(mode.k >= 1, "report mode last:K needs K >= 1, got K=", mode.k);
      const int64_t first_round = rounds.back() - mode.k + 1;
      double sum = 0;
      int64_t count = 0;
      for (size_t i = 0; i < column.size(); ++i)
        if (rounds[i] >= first_round && !std::isnan(column[i])) sum += column[i], ++count;
      return count == 0 ? kNoValue : sum / static_cast<double>(count);
    }
  }
  BASTION_FAIL("invalid ReportMode kind ", static_cast<int>(mode.kind));
}

// Two passes (mean, then squared deviations) rather than the one-pass sum of squares, which loses
// precision when the spread is small relative to the mean (accuracies 0.8123 ± 0.0001).
MeanStd mean_std(const std::vector<double>& values) {
  const std::vector<double> kept = without_nan(values);
  MeanStd result;
  result.count = static_cast<int64_t>(kept.size());
  if (kept.empty()) return result;
  double sum = 0;
  for (double v : kept) sum += v;
  result.mean = sum / static_cast<double>(kept.size());
  if (kept.size() == 1) {
    result.std = 0;
    return result;
  }
  double squares = 0;
  for (double v : kept) squares += (v - result.mean) * (v - result.mean);
  result.std = std::sqrt(squares / static_cast<double>(kept.size() - 1));
  return result;
}

// Records are taken in file order (rounds ascending); a NaN acc never reaches the target.
int64_t round_to_accuracy(const std::vector<RoundRecord>& records, double target) {
  if (!(target > 0)) return -1;
  for (const RoundRecord& record : records)
    if (record.acc >= target) return record.round;
  return -1;
}

}  // namespace bastion

namespace bastion {

ClientSpread client_spread(const std::vector<double>& values, const std::vector<double>& weights) {
  std::vector<double> kept;
  double sum = 0.0, weighted_sum = 0.0, weight_sum = 0.0;
  for (size_t i = 0; i < values.size(); ++i) {
    if (std::isnan(values[i])) continue;
    kept.push_back(values[i]);
    sum += values[i];
    weighted_sum += values[i] * weights[i];
    weight_sum += weights[i];
  }
  ClientSpread spread;
  if (kept.empty()) return spread;
  std::sort(kept.begin(), kept.end());
  const size_t n = kept.size(), mid = n / 2;
  spread.mean = sum / static_cast<double>(n);
  spread.weighted = weight_sum > 0 ? weighted_sum / weight_sum : kNoValue;
  spread.min = kept.front();
  spread.max = kept.back();
  spread.median = n % 2 == 1 ? kept[mid] : (kept[mid - 1] + kept[mid]) / 2.0;
  return spread;
}

}  // namespace bastion

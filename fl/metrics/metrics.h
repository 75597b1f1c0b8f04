// Metrics of a federated run (SPEC §4). Fractions are in [0, 1] internally and in every file; only
// the console prints percentages. A metric that does not apply (no backdoor attack → no asr) is NaN
// internally and an empty CSV cell / JSON null in files.
//
// acc   top-1 accuracy of the global model on the clean global test set
// asr   attack success rate: test samples with true label != target (unless include_target), trigger
//       applied, fraction classified as the target (pFedSAM; SPMC and FedCPA include the target class)
// bfr   1 - asr (SPMC's backdoor failure rate R);  v = (acc + bfr) / 2
// DAcc, FPR, FNR  detection, over the uploads a rule judged in a round (or cumulated over rounds):
//       DAcc = (TP + TN) / all, FPR = FP / benign, FNR = FN / malicious (positive = malicious)
// client_dacc, client_fpr, client_fnr  per-client detection (SPEC §4, FedCAP Table III): the same rates
//       over ALL clients of the run, a client counting as flagged when the rule's latest verdict on it
//       flagged it (never judged = not flagged; a permanent removal is a verdict repeated every round)
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>
#include <span>
#include <string>
#include <vector>

namespace bastion {

constexpr double kNoValue = std::numeric_limits<double>::quiet_NaN();

// The spread of one per-client figure over the clients evaluated in a round (personalised evaluation):
// plain mean, mean weighted by each client's sample count, min, median (mean of the middle two), max.
// NaN entries (a client without such samples) are skipped; all NaN when nothing is left.
struct ClientSpread {
  double mean = kNoValue, weighted = kNoValue, min = kNoValue, median = kNoValue, max = kNoValue;
};
ClientSpread client_spread(const std::vector<double>& values, const std::vector<double>& weights);

// Personalised figures of a round (eval.personalized): each evaluated benign client's own model on its
// local test split (acc), on the global test set (global_acc), and its attack success rate (asr); with
// eval.personal_received, the model it received on its local test split (received_acc).
// One evaluated client's own figures (clients.csv): acc and asr as in the p_* columns, NaN when absent.
struct PersonalClient {
  int64_t client = 0;
  double acc = kNoValue, asr = kNoValue;
  int64_t samples = 0;  // its local test samples
};

struct PersonalRecord {
  bool present = false;   // false: the run does not evaluate personalised models (no p_* columns)
  bool received = false;  // received_acc measured (p_racc columns)
  int64_t clients = 0;    // clients evaluated
  ClientSpread acc, global_acc, asr, received_acc;
  std::vector<PersonalClient> per_client;  // in client order (rank 0; not in rounds.csv)
};

struct DetectionRates {
  double dacc = kNoValue, fpr = kNoValue, fnr = kNoValue;  // NaN when the denominator is 0
};
DetectionRates detection_rates(int64_t tp, int64_t fp, int64_t tn, int64_t fn);

// Per-client verdicts: latest[c] = 1 when the rule's latest verdict on client c flagged it. A round's
// verdicts (flagged[i] on clients[i]) overwrite the earlier ones; an empty `flagged` (a rule that flags
// nobody) is a "not flagged" verdict on every client in `clients`. Clients not in `clients` keep theirs.
void record_verdicts(std::vector<uint8_t>& latest, std::span<const int64_t> clients, std::span<const uint8_t> flagged);
// DAcc/FPR/FNR over every client (positive = malicious[c] != 0) from the latest verdicts.
DetectionRates client_detection_rates(const std::vector<uint8_t>& latest, const std::vector<uint8_t>& malicious);

// One evaluated round: a row of rounds.csv. Deterministic values only (wall times live in timing.csv,
// so rounds.csv is byte-identical across thread counts and resumed runs).
struct RoundRecord {
  int64_t round = 0;
  double acc = kNoValue, loss = kNoValue;  // global model on the clean test set
  double asr = kNoValue;                   // NaN without a backdoor attack
  double local_acc = kNoValue;             // mean over clients of acc on their local test split
  double train_loss = kNoValue;            // mean local training loss of the round's clients
  int64_t sampled = 0, malicious = 0;      // clients this round, attackers among them
  int64_t rejected = 0;                    // uploads rejected by validation (NaN/Inf/length)
  int64_t true_positive = 0, false_positive = 0, true_negative = 0, false_negative = 0;  // detection
  int64_t bytes_up = 0, bytes_down = 0;  // float32 payloads: uploads and models sent
  DetectionRates client_detection;       // per client, latest verdicts (set at evaluation)
  PersonalRecord personal;               // p_* columns, written only when present
};

inline double backdoor_failure_rate(double asr) { return std::isnan(asr) ? kNoValue : 1.0 - asr; }
inline double v_score(double acc, double asr) { return std::isnan(asr) ? kNoValue : (acc + 1.0 - asr) / 2.0; }

// Reported figure of a run (SPEC §4): "last" (latest measured value), "last:K" (mean of the values
// measured in the last K rounds of the run, R - K + 1 .. R, R = rounds.back(); SPMC K=5, FedCPA K=10),
// "best" (maximum). Applied to one column with its round numbers (non-decreasing), skipping NaN.
// Throws on an unknown mode or K < 1; returns NaN when no value counts.
struct ReportMode {
  enum Kind { Last, LastMean, Best } kind = Last;
  int64_t k = 1;
};
ReportMode parse_report_mode(const std::string& text);
double reported_value(const std::vector<double>& column, const std::vector<int64_t>& rounds, const ReportMode& mode);

struct MeanStd {
  double mean = kNoValue, std = kNoValue;  // sample std (n - 1); 0 for one value; NaNs skipped
  int64_t count = 0;
};
MeanStd mean_std(const std::vector<double>& values);

// First round whose acc >= target; -1 if never.
int64_t round_to_accuracy(const std::vector<RoundRecord>& records, double target);

}  // namespace bastion

// Results files of `bastion run` (all written atomically by the caller with write_file_atomic):
//   rounds.csv   one row per evaluated round, header first; columns = RoundRecord fields in order
//                (round,acc,asr,bfr,v,loss,local_acc,train_loss,sampled,malicious,rejected,tp,fp,tn,fn,
//                bytes_up,bytes_down,client_dacc,client_fpr,client_fnr, and for personalised runs the p_*
//                columns); tp..fn count uploads (per upload), client_* rate clients (per client,
//                metrics.h); reals with 6 significant
//                digits ("%.6g"), NaN as an empty cell.
//   timing.csv   round,train_s,aggregate_s,eval_s,round_s,cpu_s: wall times, and the CPU seconds the process
//                spent in the round (user + system, every thread: the round's core-seconds, whatever else
//                shares the cores); cpu_s is empty where it was not measured (a run spread over MPI ranks,
//                rounds written before the column). Files without the column (older runs) are still read.
//                Not deterministic by nature.
//   summary.json the reported figures (see RunSummary) and, for repeated seeds, mean ± std
//   curves.svg   acc and asr (when present) over rounds, self-contained SVG (axes, ticks, legend),
//                readable in any browser, no other tool needed.
#pragma once

#include <string>
#include <vector>

#include "fl/metrics/metrics.h"

namespace bastion {

struct RoundTiming {
  int64_t round = 0;
  double train_seconds = 0, aggregate_seconds = 0, eval_seconds = 0, round_seconds = 0;
  double cpu_seconds = kNoValue;  // the process's CPU time in the round; NaN: not measured
};

// What one seed's run reports (summary.json "runs" entries).
struct RunSummary {
  uint64_t seed = 0;
  int64_t rounds = 0;  // the last evaluated round (0 without records)
  double acc = kNoValue, asr = kNoValue, bfr = kNoValue, v = kNoValue, local_acc = kNoValue;  // per report mode
  double final_acc = kNoValue, best_acc = kNoValue;
  int64_t round_to_target = -1;     // -1: never (or no target set)
  DetectionRates detection;         // per upload, cumulated over all rounds
  DetectionRates client_detection;  // per client: the last evaluated round's (latest verdicts)
  int64_t rejected = 0, bytes_up = 0, bytes_down = 0;
  double seconds_per_round = kNoValue;  // median wall time per round
  // Personalised runs: ("p_acc", v), ("p_acc_w", v), ... ("p_asr_max", v), each per report mode; empty otherwise.
  std::vector<std::pair<std::string, double>> personal;
  double personal_value(const std::string& name) const;  // NaN when absent
  // What the run really used, beside the configuration: the malicious clients' ids (ascending), which
  // config.toml gives only as a count or fraction and a seeded choice.
  std::vector<int64_t> malicious_clients;
  // Values the server rule and the collusion attack derived in the latest round they ran ("server.krum.f",
  // "attack.lie.z"), in name order: what config.toml's -1 and 0 defaults became.
  std::vector<std::pair<std::string, double>> resolved;
};

// Summarises one run's records (report = "last" | "last:K" | "best"; target_acc <= 0 disables it).
// The report mode applies to each column on its own: "best" gives the highest asr, not the asr of
// the round with the best acc. bfr and v come from the reported acc and asr.
RunSummary summarize_run(uint64_t seed, const std::vector<RoundRecord>& records,
                         const std::vector<RoundTiming>& timings, const std::string& report, double target_acc);

// With personalised records the p_* columns follow (p_clients, then p_acc, p_acc_w, p_acc_min, p_acc_med,
// p_acc_max and the same for p_gacc and p_asr, then for p_racc when the received models were evaluated).
// summary.json's "personalized" object has each column's reported value and p_tacc, the better of
// p_acc_w and p_racc_w (FedCAP's TAcc; p_acc_w alone without p_racc).
std::string rounds_csv(const std::vector<RoundRecord>& records);
// The record as rounds.csv gives it back (every real at 6 significant digits): the run loop keeps its
// records in this form, so summaries computed from a resumed run's parsed rows and from an
// uninterrupted run's records agree to the last digit.
RoundRecord as_printed(RoundRecord record);
// Parses rounds_csv output back (for resume and tests); throws on a malformed file.
std::vector<RoundRecord> parse_rounds_csv(const std::string& text);
// value with `digits` decimals, independent of the C/C++ locale ("" for NaN): for every results file.
std::string fixed_text(double value, int digits);
// One CSV row: the cells joined by commas, then a newline (every results file's rows).
std::string join_row(const std::vector<std::string>& cells);

std::string timing_csv(const std::vector<RoundTiming>& timings);
// Parses timing_csv output back (bastion report); throws naming the file, line and column.
std::vector<RoundTiming> parse_timing_csv(const std::string& text);
// The fields of `text` between separators, empty ones included ("a,,b" -> a, "", b): every results file's
// rows and cells.
std::vector<std::string> split_fields(const std::string& text, char separator);

// client_notes.csv: what a client rule chose for a client in a round (ClientResult::note; FedFSA's Top-C
// tensors), one row per note: round,client,note. Notes hold no commas, quotes or line breaks (checked).
struct ClientNote {
  int64_t round = 0, client = 0;
  std::string text;
};
std::string client_notes_csv(const std::vector<ClientNote>& notes);
// Parses client_notes_csv output back (resume keeps the rows up to the checkpoint's round; tests).
std::vector<ClientNote> parse_client_notes_csv(const std::string& text);

// clients.csv: one row per client and evaluated round (eval.clients_csv): round,client,sampled,malicious,
// flagged,p_acc,p_asr,samples. sampled: trained since the previous row; flagged: the server rule's latest
// verdict; p_acc / p_asr: its own model's figures (empty without personalised evaluation, and for the
// malicious clients, which are not judged); samples: its local test samples (0 without them).
struct ClientRow {
  int64_t round = 0, client = 0;
  bool sampled = false, malicious = false, flagged = false;
  double p_acc = kNoValue, p_asr = kNoValue;
  int64_t samples = 0;
};
std::string clients_csv(const std::vector<ClientRow>& rows);
std::vector<ClientRow> parse_clients_csv(const std::string& text);  // resume and tests; throws on a malformed file

// partition.csv: the data each client was dealt, written once at the start of a run (issue 41: what a run
// really used): client,size,test_size,malicious,class_0,...,class_<C-1>. size: its training samples (after
// data.max_per_client), test_size: its own local test split (data.client_test_fraction; 0 under
// local_test = like-train, whose dealt test sets clients.csv's `samples` counts), malicious: 1 for the
// run's attackers, class_k: its
// training samples of class k (they sum to size). The columns before `malicious` are `bastion data stats
// --out`'s.
std::string partition_csv(const std::vector<std::vector<int64_t>>& class_counts, const std::vector<int64_t>& test_sizes,
                          const std::vector<int64_t>& malicious_clients);

// {"name", "report", "runs": [per seed], "mean": {...}, "std": {...}} — mean/std over runs of acc,
// asr, bfr, v, local_acc, final_acc, best_acc, seconds_per_round, client_dacc, client_fpr, client_fnr
// (NaNs skipped; null when none).
std::string summary_json(const std::string& name, const std::string& report, const std::vector<RunSummary>& runs);
// Its "runs" entries back (fl/metrics/summary_parse.cpp), so that seeds run by separate invocations can be
// summarised together; throws naming `path` when the text is not such a file. A field written by later
// versions only reads as its default. SummaryEntry keeps the entry's own JSON text beside it.
std::vector<RunSummary> parse_summary_runs(const std::string& text, const std::string& path);
struct SummaryEntry {
  RunSummary run;
  std::string json;  // the entry as its file wrote it
};
std::vector<SummaryEntry> parse_summary_entries(const std::string& text, const std::string& path);
// summary.json over entries read from other files: mean and std from their runs, each entry as written
// (a field its version did not write stays absent, rather than read as a default and written as a fact).
std::string summary_json(const std::string& name, const std::string& report, const std::vector<SummaryEntry>& entries);

// Text for SVG or HTML: & < > " ' as entities (the plots' titles and labels, bastion report's cells).
std::string xml_escape(const std::string& text);

// Acc (and asr if any value is present) over rounds, one polyline per seed when several are given.
std::string curves_svg(const std::string& title, const std::vector<std::vector<RoundRecord>>& runs);

// `bastion plot`: one metric (overlay_metrics(): acc, asr, local_acc, p_acc, p_acc_w, p_asr, p_gacc,
// p_racc, p_racc_w) of several runs over rounds, one colour per run; a run with several seeds is drawn as
// the mean over its seeds (thick) over each seed (thin, faint). Throws naming the metric when unknown.
struct LabelledRuns {
  std::string label;
  std::vector<std::vector<RoundRecord>> seeds;
};
std::string overlay_svg(const std::string& title, const std::string& metric, const std::vector<LabelledRuns>& runs);
const std::vector<std::string>& overlay_metrics();
// Whether any round of any seed has a value of overlay metric `metric` (false for an unknown name).
bool overlay_metric_measured(const std::vector<std::vector<RoundRecord>>& seeds, const std::string& metric);

// The last stdout line of `bastion run`: "acc=0.8123 asr=0.0412" (asr=- when no backdoor), with
// "± std" figures when there are several runs: "acc=0.8123±0.0100 asr=...".
std::string summary_line(const std::vector<RunSummary>& runs);

}  // namespace bastion

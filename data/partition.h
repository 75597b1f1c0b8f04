// Federated partitions (SPEC §2, IMPLEMENTATION-FACTS §§1.1, 2.3, 3.2, 5.3, 7.1): split a dataset's
// sample indices over N clients. A client is a list of indices into the shared Dataset (never a copy).
// Every partition is a pure function of (dataset labels/groups, spec, clients, seed): same inputs give
// the same lists on any machine and thread count (each purpose draws from its own Generator(seed).fork).
// No index is ever given to two clients, nor to a client and the server. docs/partitions.md has the
// rules in full, which paper uses which, and where we differ from the authors' code.
//
// Written names (CLI, configs):
//   iid              shuffle, then N near-equal contiguous chunks (sizes differ by at most 1)
//   dirichlet:BETA   per class k = 0..K-1, proportions p ~ Dir(BETA·1_N) over clients (NIID-Bench, used by
//                    SPMC and FedCPA): clients already holding >= total/N samples get p_j = 0 (the capping
//                    rule; `dirichlet_cap = false` turns it off), renormalise, cut the shuffled class list
//                    at int(cumsum(p)·len) like numpy; redraw everything until every client has
//                    >= min_size samples (at most max_attempts draws, then throw).
//                    Variant `dirichlet_client_prior = true` is FedFSA's: each client draws a class prior
//                    π_i ~ Dir(BETA·1_C) and equal-size clients (floor(total/N) each; the total mod N
//                    leftover samples are not assigned) are filled sample by sample: a random client with
//                    quota left draws a class from π_i renormalised over the classes that still have
//                    samples (§3.2; the class-0 quirk of the authors' code is NOT reproduced).
//   pathological:S   every client gets S distinct classes as S shards of equal size
//                    (shard = floor(total / (N·S)) samples), so all clients have exactly S·shard samples.
//                    Class k supplies at most floor(count_k / shard) shards (and at most N); samples
//                    left over are not assigned. When rounding leaves too few shards (unbalanced classes,
//                    a server hold-out), the shard shrinks to the largest size the classes can supply.
//   emnist-groups    FedCAP's EMNIST split: classes fall in 3 groups (digits 0–9, upper 10–35, lower
//                    36–61); client i is assigned group i mod 3; 80 % of its samples come from its
//                    group, 20 % from all classes (the remaining unused samples); equal client sizes, the
//                    largest <= total/N for which every group can supply its clients' 80 %.
//   natural          one client per distinct Dataset::groups value (WISDM users), in increasing id order;
//                    N must equal the number of groups (or be 0 = take that number).
// Before the split, `server_fraction` holds out the LAST floor(fraction·size) samples in the dataset's
// original order as the server's own data (SPMC's 90/10 train/validation cut; FLTrust root set, SageFlow
// public set, finetune validation set); only the rest ("total" above) is partitioned. `natural` holds out
// per group instead: the last floor(fraction·n_g) samples of each group, so every user keeps its client.
// Options applied after the split, in this order: `max_per_client` caps each client (keeps a seeded
// random subset); `client_test_fraction` moves that fraction of each client's samples (rounded down,
// seeded) into its local test list. Every list is sorted ascending.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "data/dataset.h"

namespace bastion {

enum class PartitionKind { kIid, kDirichlet, kPathological, kEmnistGroups, kNatural };

struct PartitionSpec {
  PartitionKind kind = PartitionKind::kIid;
  double beta = 0.5;                    // dirichlet concentration, > 0
  int64_t shards = 2;                   // pathological: classes per client, in [1, num_classes]
  int64_t min_size = 10;                // dirichlet (class mode): redraw until every client has at least this many
  bool dirichlet_cap = true;            // NIID-Bench capping rule (see above)
  bool dirichlet_client_prior = false;  // FedFSA's per-client-prior variant
  int64_t max_attempts = 1000;          // dirichlet redraws before giving up with an error
  int64_t max_per_client = 0;           // 0 = no cap
  double client_test_fraction = 0.0;    // in [0, 1)
  double server_fraction = 0.0;         // in [0, 1)
};

// Parses "iid", "dirichlet:0.5", "pathological:5", "emnist-groups", "natural". Unknown names, a
// missing, extra or non-numeric parameter, beta <= 0 (or not finite) or S < 1 throw, naming the bad text
// and listing the valid forms. Options other than kind/beta/shards keep their defaults.
PartitionSpec parse_partition(const std::string& text);

// The written form of a spec's kind and parameter, e.g. "dirichlet:0.5" (shortest text that parses back
// to the same beta). The client-prior flag and the options are not part of the name.
std::string partition_name(const PartitionSpec& spec);

struct Partition {
  std::vector<std::vector<int64_t>> train;  // per client: indices into the dataset, sorted ascending
  std::vector<std::vector<int64_t>> test;   // per client: local test indices (empty lists without a split)
  std::vector<int64_t> server;              // held-out server indices (empty when server_fraction = 0)
  int64_t num_clients() const { return static_cast<int64_t>(train.size()); }
};

// Splits `data` over `clients` clients. Throws (naming the spec and the numbers) when the request is
// impossible: more clients than samples, S > classes or too few shards, dirichlet cannot reach min_size
// in max_attempts, natural without group ids or with a client count that differs from the groups,
// emnist-groups on a set that is not 62-class, an option out of range.
Partition make_partition(const Dataset& data, const PartitionSpec& spec, int64_t clients, uint64_t seed);

// Per-client class histogram: counts[client][class] over `lists` (e.g. Partition::train).
std::vector<std::vector<int64_t>> class_histogram(const Dataset& data, const std::vector<std::vector<int64_t>>& lists);

// Summary of a partition for the CLI and the tests. Sizes are list lengths; a client "has" a class when
// it holds at least one sample of it.
struct PartitionStats {
  int64_t clients = 0;  // number of lists
  int64_t total = 0;    // samples over all lists
  int64_t min_size = 0, max_size = 0;
  double median_size = 0.0;   // mean of the two middle sizes for an even count
  double mean_classes = 0.0;  // classes held, averaged over clients (the heterogeneity measure)
  int64_t min_classes = 0, max_classes = 0;
};
PartitionStats partition_stats(const Dataset& data, const std::vector<std::vector<int64_t>>& lists);
// The same from a histogram already computed with class_histogram (counts[client][class]).
PartitionStats partition_stats(const std::vector<std::vector<int64_t>>& histogram);

}  // namespace bastion

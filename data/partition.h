// Federated partitions (SPEC §2, IMPLEMENTATION-FACTS §§1.1, 2.3, 3.2, 5.3, 7.1): split a dataset's
// sample indices over N clients. A client is a list of indices into the shared Dataset (never a copy).
// Every partition is a pure function of (dataset labels/groups, spec, clients, seed): same inputs give
// the same lists on any machine and thread count.
//
// Written names (CLI, configs):
//   iid              shuffle, then N near-equal contiguous chunks (sizes differ by at most 1)
//   dirichlet:BETA   per class, proportions p ~ Dir(BETA·1_N) over clients (NIID-Bench, used by SPMC and
//                    FedCPA): clients already holding >= total/N samples get p_j = 0 (the capping rule;
//                    `dirichlet_cap = false` turns it off), renormalise, cut the shuffled class list at the
//                    cumulative proportions; redraw everything until every client has >= min_size samples.
//                    Variant `dirichlet_mode = client-prior` is FedFSA's: each client draws a class prior
//                    π_i ~ Dir(BETA·1_C) and equal-size clients are filled sample by sample (§3.2; the
//                    class-0 quirk of the authors' code is NOT reproduced, see docs/decisions.md).
//   pathological:S   every client gets S distinct classes as S shards of equal size
//                    (shard = floor(total / (N·S)) samples), so all clients have the same size.
//   emnist-groups    FedCAP's EMNIST split: classes fall in 3 groups (digits 0–9, upper 10–35, lower
//                    36–61); client i is assigned group i mod 3; 80 % of its samples come from its
//                    group, 20 % from all classes; equal client sizes.
//   natural          one client per distinct Dataset::groups value (WISDM users), in increasing id order;
//                    N must equal the number of groups (or be 0 = take that number).
// Before the split, `server_fraction` holds out the LAST floor(fraction·size) samples in the dataset's
// original order as the server's own data (SPMC's 90/10 train/validation cut; FLTrust root set, SageFlow
// public set, finetune validation set); only the rest is partitioned.
// Options applied after the split, in this order: `max_per_client` caps each client (keeps a seeded
// random subset); `client_test_fraction` moves that fraction of each client's samples (rounded down,
// seeded) into its local test list.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "data/dataset.h"

namespace bastion {

enum class PartitionKind { kIid, kDirichlet, kPathological, kEmnistGroups, kNatural };

struct PartitionSpec {
  PartitionKind kind = PartitionKind::kIid;
  double beta = 0.5;       // dirichlet concentration, > 0
  int64_t shards = 2;      // pathological: classes per client, in [1, num_classes]
  int64_t min_size = 10;   // dirichlet (class mode): redraw until every client has at least this many
  bool dirichlet_cap = true;              // NIID-Bench capping rule (see above)
  bool dirichlet_client_prior = false;    // FedFSA's per-client-prior variant
  int64_t max_attempts = 1000;            // dirichlet redraws before giving up with an error
  int64_t max_per_client = 0;             // 0 = no cap
  double client_test_fraction = 0.0;      // in [0, 1)
  double server_fraction = 0.0;           // in [0, 1)
};

// Parses "iid", "dirichlet:0.5", "pathological:5", "emnist-groups", "natural". Unknown names, a
// missing or non-numeric parameter, beta <= 0 or S < 1 throw, listing the valid forms.
PartitionSpec parse_partition(const std::string& text);

// The written form of a spec's kind and parameter, e.g. "dirichlet:0.5".
std::string partition_name(const PartitionSpec& spec);

struct Partition {
  std::vector<std::vector<int64_t>> train;  // per client: indices into the dataset, sorted ascending
  std::vector<std::vector<int64_t>> test;   // per client: local test indices (empty lists without a split)
  std::vector<int64_t> server;              // held-out server indices (empty when server_fraction = 0)
  int64_t num_clients() const { return static_cast<int64_t>(train.size()); }
};

// Splits `data` over `clients` clients. Throws (naming the spec and the numbers) when the request is
// impossible: more clients than samples, S > classes, dirichlet cannot reach min_size in max_attempts,
// natural without group ids or with a client count that differs from the groups, emnist-groups on a set
// that is not 62-class.
Partition make_partition(const Dataset& data, const PartitionSpec& spec, int64_t clients, uint64_t seed);

// Per-client class histogram: counts[client][class] over `lists` (e.g. Partition::train).
std::vector<std::vector<int64_t>> class_histogram(const Dataset& data,
                                                  const std::vector<std::vector<int64_t>>& lists);

}  // namespace bastion

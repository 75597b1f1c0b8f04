// column_subset: run a server rule on a named subset of the model's columns only (server.apply_to), e.g.
// the shared body of pFedSAM/FedRep, so "pFedSAM + Multi-Krum" scores and selects clients on the body
// alone. The columns outside the subset are averaged (sample-weighted FedAvg, rest = mean) or left
// unchanged (rest = keep: personalised heads that the server does not own).
//
// The inner rule sees an (n, D_sub) matrix of the selected columns in model order, with its own
// num_parameters (selected parameter columns first, then selected buffer columns), the matching slice of
// the global state, and a server-data view that trains and evaluates full models whose other columns
// are the current global ones. Its flags pass through unchanged. Cost: one O(n D_sub) gather per round.
#pragma once

#include <memory>
#include <vector>

#include "fl/defenses/server_rule.h"

namespace bastion {

// `ranges` (columns of a row) restricted to `subset` (sorted, disjoint) and renumbered in the coordinates
// of the sub-row that gathers `subset` in order. Empty when they share no column.
std::vector<ColumnRange> ranges_within(std::span<const ColumnRange> ranges, std::span<const ColumnRange> subset);

// Server data seen through a column subset: a sub-state (the selected columns, in range order) is
// completed with `global`'s other columns before training or evaluation; training returns the
// selected columns of the trained state. `full`, `global` and `ranges` must outlive it.
std::unique_ptr<ServerData> make_subset_server_data(ServerData& full, std::span<const float> global,
                                                    const std::vector<ColumnRange>& ranges);

// `ranges` sorted, disjoint, inside [0, D); parameter ranges (end <= num_parameters) before buffer ones.
std::unique_ptr<ServerRule> make_column_subset(std::unique_ptr<ServerRule> inner, std::vector<ColumnRange> ranges,
                                               bool rest_mean);

}  // namespace bastion

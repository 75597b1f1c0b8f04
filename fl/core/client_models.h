// Per-client bookkeeping of the run loop (DESIGN.md "Personalized FL", hooks 1 and 2): which columns a
// client uploads, the upload itself, and each sampled client's start state.
//
// SharedColumns: the columns of the flat state (parameters, then BatchNorm buffers) that the client rule
// shares: all of them (FedAvg), the body (FedRep: every parameter outside the head, and every buffer),
// or none (local training). An upload row holds exactly these columns, in model order (shared
// parameters first, then shared buffers), so the server rule, the model attacks and the byte counts
// see the shared part and nothing else. With every column shared the row is the whole state, as before
// personalisation existed.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "fl/clients/client_rule.h"
#include "fl/defenses/column_subset.h"
#include "fl/defenses/server_rule.h"
#include "nn/model.h"

namespace bastion {

struct SharedColumns {
  std::vector<ColumnRange> ranges;  // sorted, disjoint; parameter ranges first
  int64_t width = 0;                // columns uploaded
  int64_t parameters = 0;           // of which parameters (the rest are buffers)
  bool all = true;                  // every column: rows are whole states

  // out[k] = full[column k] for the shared columns.
  void gather(std::span<const float> full, float* out) const;
  // out[k] = trained[column k] - start[column k]: a client's upload.
  void difference(std::span<const float> trained, std::span<const float> start, float* out) const;
  // full[column k] += update[k]: the server's step on the shared part.
  void add_into(std::span<const float> update, std::span<float> full) const;
  // full[column k] = part[k].
  void assign_into(std::span<const float> part, std::span<float> full) const;
};

SharedColumns shared_columns(const Model& model, SharedPart part);

// DESIGN.md pFL hook 1: the start state of each sampled client from the server rule's round plan
// (ServerRule::plan_round), (sampled.size(), D) row-major in `starts`: the global state, with the shared
// columns replaced by the plan's row where the plan gives the client its own. `global_shared` is the
// global state's shared columns (the rule's view); `request_updates` answers the plan's extra update
// requests (empty: none can be trained). Returns false, with `starts` empty, when the rule has no plan.
bool plan_start_states(ServerRule& rule, const SharedColumns& shared, std::span<const float> global,
                       std::span<const float> global_shared, const std::vector<int64_t>& sampled,
                       const RequestUpdates& request_updates, std::vector<float>& starts);

// `ranges` (columns of the full state, e.g. server.apply_to's) restricted to the shared columns and
// renumbered in the upload row's coordinates. Empty when they share no column.
std::vector<ColumnRange> ranges_within_shared(const std::vector<ColumnRange>& ranges, const SharedColumns& shared);

}  // namespace bastion

// The natural partition (one client per user of a grouped set, e.g. WISDM) and its per-user hold-out of
// the server's share; make_partition (data/partition.cpp) calls them.
#include <algorithm>
#include <map>

#include "data/partition_internal.h"
#include "tensor/error.h"

namespace bastion::partition_detail {
namespace {

// Each group id's sample indices (ids and indices ascending), leaving out `held` (sorted).
std::map<int32_t, std::vector<int64_t>> group_members(const Dataset& data, const std::vector<int64_t>& held) {
  std::vector<uint8_t> skip(static_cast<size_t>(data.size()), 0);
  for (int64_t i : held) skip[static_cast<size_t>(i)] = 1;
  std::map<int32_t, std::vector<int64_t>> members;
  for (int64_t i = 0; i < data.size(); ++i)
    if (!skip[static_cast<size_t>(i)]) members[data.groups[static_cast<size_t>(i)]].push_back(i);
  return members;
}

}  // namespace

// The server's share of a grouped set: the last floor(fraction * n_g) samples of each group g, sorted. A
// grouped set is stored user by user, so the tail of the whole set (what the other kinds hold out) would
// take the last users whole, and with them clients the natural split needs (FedCAP's FLTrust row on WISDM
// held out one of the 36 users); per group, every user keeps all but a fraction of its samples.
std::vector<int64_t> hold_out_per_group(const Dataset& data, double fraction) {
  std::vector<int64_t> server;
  for (const auto& [group, indices] : group_members(data, {})) {
    const int64_t count = floor_fraction(fraction, static_cast<int64_t>(indices.size()));
    server.insert(server.end(), indices.end() - count, indices.end());
  }
  std::sort(server.begin(), server.end());
  return server;
}

// One client per group id, in ascending id order; `server` (sorted) is held out.
Lists split_natural(const Dataset& data, const std::vector<int64_t>& server, int64_t n, const PartitionSpec& spec) {
  std::map<int32_t, std::vector<int64_t>> members = group_members(data, server);
  BASTION_CHECK(n == 0 || n == static_cast<int64_t>(members.size()), partition_name(spec), ": '", data.name, "' has ",
                members.size(), " groups in the split samples, so it needs ", members.size(), " clients (or 0), got ",
                n);
  Lists lists;
  for (auto& [group, indices] : members) lists.push_back(std::move(indices));
  return lists;
}

}  // namespace bastion::partition_detail

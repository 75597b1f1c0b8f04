// RuleState: the memory a server rule or a method server keeps between rounds (FoolsGold's histories,
// FedCAP's pool, the SAM family's duals, ...), as named, typed blocks, so no rule packs integers into
// floats or counts offsets by hand. Checkpoints (fl/core/checkpoint.h) store each block as its own entry
// with the codec's version; a rule reads its blocks back by name and type.
//   floats  float32 values (models, histories, duals)
//   reals   float64 values, stored exactly (SPMC's aggregation weights)
//   ints    int64 values (client ids, counts, index lists, 0/1 flags)
// Names are [a-z0-9_]+ and unique across the three types. A checkpoint written before the codec holds one
// float vector: it loads as the float block kLegacyBlock, which a rule reads with its old layout
// (legacy()), so those checkpoints still resume.
#pragma once

#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <vector>

namespace bastion {

inline constexpr int64_t kRuleStateVersion = 1;
inline constexpr const char* kLegacyBlock = "legacy";

class RuleState {
 public:
  // `owner` names the rule in errors ("fedcap", "foolsgold", ...).
  RuleState() = default;
  explicit RuleState(std::string owner) : owner_(std::move(owner)) {}

  void put_floats(const std::string& name, std::vector<float> values);
  void put_reals(const std::string& name, std::vector<double> values);
  void put_ints(const std::string& name, std::vector<int64_t> values);
  void put_int(const std::string& name, int64_t value) { put_ints(name, {value}); }

  // Per-client rows (client id -> `width` values) as two blocks: "<name>_ids" (ascending ids) and "<name>"
  // (the rows in that order). per_client refuses ids outside [0, clients) or rows of another width.
  void put_per_client(const std::string& name, const std::map<int64_t, std::vector<float>>& rows);
  std::map<int64_t, std::vector<float>> per_client(const std::string& name, int64_t clients, size_t width) const;

  bool empty() const { return floats_.empty() && reals_.empty() && ints_.empty(); }
  bool has(const std::string& name) const;
  // The block `name` of that type; throws bastion::Error naming the owner and the block when it is
  // missing or of another type (a checkpoint of another rule, or a damaged one).
  const std::vector<float>& floats(const std::string& name) const;
  const std::vector<double>& reals(const std::string& name) const;
  const std::vector<int64_t>& ints(const std::string& name) const;
  // One value of an int block of exactly one value, in [low, high].
  int64_t int_in(const std::string& name, int64_t low, int64_t high) const;
  // ints(name), each in [0, bound): client ids, indices.
  const std::vector<int64_t>& ids_below(const std::string& name, int64_t bound) const;
  // floats(name) of exactly `size` values, every one finite.
  const std::vector<float>& finite_floats(const std::string& name, size_t size) const;

  // A checkpoint from before the codec: its one float vector, or empty when the state has blocks.
  std::span<const float> legacy() const;
  static RuleState from_legacy(std::vector<float> values, std::string owner = "rule");

  const std::map<std::string, std::vector<float>>& float_blocks() const { return floats_; }
  const std::map<std::string, std::vector<double>>& real_blocks() const { return reals_; }
  const std::map<std::string, std::vector<int64_t>>& int_blocks() const { return ints_; }
  const std::string& owner() const { return owner_; }
  void set_owner(std::string owner) { owner_ = std::move(owner); }
  bool operator==(const RuleState& other) const {
    return floats_ == other.floats_ && reals_ == other.reals_ && ints_ == other.ints_;
  }

 private:
  std::string owner_ = "rule";
  std::map<std::string, std::vector<float>> floats_;
  std::map<std::string, std::vector<double>> reals_;
  std::map<std::string, std::vector<int64_t>> ints_;
  void check_new_name(const std::string& name) const;
};

}  // namespace bastion

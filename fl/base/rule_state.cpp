#include "fl/base/rule_state.h"

#include <algorithm>
#include <cmath>

#include "tensor/error.h"

namespace bastion {

namespace {
bool valid_name(const std::string& name) {
  return !name.empty() && std::all_of(name.begin(), name.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_';
  });
}

template <typename Map>
const typename Map::mapped_type& block(const Map& map, const std::string& name, const char* type,
                                       const std::string& owner) {
  const auto found = map.find(name);
  BASTION_CHECK(found != map.end(), owner, " state: block '", name, "' (", type, ") is missing: the checkpoint was ",
                "written by another rule or is damaged");
  return found->second;
}
}  // namespace

void RuleState::check_new_name(const std::string& name) const {
  BASTION_CHECK(valid_name(name), owner_, " state: block name '", name, "' is not [a-z0-9_]+");
  BASTION_CHECK(!has(name), owner_, " state: block '", name, "' given twice");
}

void RuleState::put_floats(const std::string& name, std::vector<float> values) {
  check_new_name(name);
  floats_[name] = std::move(values);
}
void RuleState::put_reals(const std::string& name, std::vector<double> values) {
  check_new_name(name);
  reals_[name] = std::move(values);
}
void RuleState::put_ints(const std::string& name, std::vector<int64_t> values) {
  check_new_name(name);
  ints_[name] = std::move(values);
}

bool RuleState::has(const std::string& name) const {
  return floats_.contains(name) || reals_.contains(name) || ints_.contains(name);
}

const std::vector<float>& RuleState::floats(const std::string& name) const {
  return block(floats_, name, "float32", owner_);
}
const std::vector<double>& RuleState::reals(const std::string& name) const {
  return block(reals_, name, "float64", owner_);
}
const std::vector<int64_t>& RuleState::ints(const std::string& name) const {
  return block(ints_, name, "int64", owner_);
}

int64_t RuleState::int_in(const std::string& name, int64_t low, int64_t high) const {
  const std::vector<int64_t>& values = ints(name);
  BASTION_CHECK(values.size() == 1 && values[0] >= low && values[0] <= high, owner_, " state: block '", name,
                "' should be one value in [", low, ", ", high, "], it holds ", values.size(),
                values.size() == 1 ? " value " + std::to_string(values[0]) : std::string(" values"));
  return values[0];
}

const std::vector<int64_t>& RuleState::ids_below(const std::string& name, int64_t bound) const {
  const std::vector<int64_t>& values = ints(name);
  const auto bad = std::find_if(values.begin(), values.end(), [&](int64_t v) { return v < 0 || v >= bound; });
  BASTION_CHECK(bad == values.end(), owner_, " state: block '", name, "' holds ", bad == values.end() ? 0 : *bad,
                ", outside [0, ", bound, ")");
  return values;
}

const std::vector<float>& RuleState::finite_floats(const std::string& name, size_t size) const {
  const std::vector<float>& values = floats(name);
  BASTION_CHECK(values.size() == size, owner_, " state: block '", name, "' holds ", values.size(), " values, expected ",
                size);
  BASTION_CHECK(std::all_of(values.begin(), values.end(), [](float v) { return std::isfinite(v); }), owner_,
                " state: block '", name, "' holds NaN or Inf");
  return values;
}

void RuleState::put_per_client(const std::string& name, const std::map<int64_t, std::vector<float>>& rows) {
  std::vector<int64_t> ids;
  std::vector<float> values;
  for (const auto& [id, row] : rows) {
    ids.push_back(id);
    values.insert(values.end(), row.begin(), row.end());
  }
  put_ints(name + "_ids", std::move(ids));
  put_floats(name, std::move(values));
}

std::map<int64_t, std::vector<float>> RuleState::per_client(const std::string& name, int64_t clients,
                                                            size_t width) const {
  const std::vector<int64_t>& ids = ids_below(name + "_ids", clients);
  const std::vector<float>& values = floats(name);
  BASTION_CHECK(values.size() == ids.size() * width, owner_, " state: block '", name, "' holds ", values.size(),
                " values for ", ids.size(), " clients of ", width);
  std::map<int64_t, std::vector<float>> rows;
  for (size_t k = 0; k < ids.size(); ++k) {
    BASTION_CHECK(!rows.contains(ids[k]), owner_, " state: block '", name, "_ids' holds client ", ids[k], " twice");
    rows[ids[k]].assign(values.begin() + k * width, values.begin() + (k + 1) * width);
  }
  return rows;
}

std::span<const float> RuleState::legacy() const {
  const auto found = floats_.find(kLegacyBlock);
  return found == floats_.end() ? std::span<const float>() : std::span<const float>(found->second);
}

RuleState RuleState::from_legacy(std::vector<float> values, std::string owner) {
  RuleState state(std::move(owner));
  if (!values.empty()) state.floats_[kLegacyBlock] = std::move(values);
  return state;
}

}  // namespace bastion

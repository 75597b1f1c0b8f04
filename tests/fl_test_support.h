// Helpers shared by the FL test files.
#pragma once

#include <map>
#include <memory>
#include <string>

#include "fl/registry.h"

namespace bastion::testing {

// The registered attack `name` with its defaults, overridden by `given` (validated like a config table).
inline std::unique_ptr<Attack> build_attack(const std::string& name, const std::map<std::string, ParamValue>& given = {}) {
  const AttackEntry& entry = find_attack(name);
  return entry.make(Params("attack." + name, *entry.info.params, given));
}

}  // namespace bastion::testing

// NameTable: string interning for event names (see gpuutil/names.h).
#include "gpuutil/names.h"

namespace gpuutil {

NameTable::NameTable() {
  strings_.emplace_back();
  index_.emplace(std::string_view(strings_.back()), kNoName);
}

NameId NameTable::intern(std::string_view name) {
  auto it = index_.find(name);
  if (it != index_.end()) return it->second;
  strings_.emplace_back(name);
  const auto id = static_cast<NameId>(strings_.size() - 1);
  index_.emplace(std::string_view(strings_.back()), id);
  return id;
}

std::string_view NameTable::view(NameId id) const {
  if (id >= strings_.size()) return {};
  return strings_[id];
}

}  // namespace gpuutil

// Interned names for the event model.
//
// Kernel and op names repeat millions of times in a run; events carry a
// 32-bit NameId instead of a string. A NameTable owns the bytes. Interning is
// for the (single) thread that fills an EventStore; lookups are read-only and
// safe from any thread once filling is done.
#pragma once

#include <cstdint>
#include <deque>
#include <string>
#include <string_view>
#include <unordered_map>

namespace gpuutil {

using NameId = uint32_t;
inline constexpr NameId kNoName = 0;  // the empty name, always present

class NameTable {
 public:
  NameTable();
  NameTable(const NameTable&) = delete;  // ids would alias another table's storage
  NameTable& operator=(const NameTable&) = delete;
  NameTable(NameTable&&) noexcept = default;
  NameTable& operator=(NameTable&&) noexcept = default;

  // Returns the id of `name`, adding it if new. Not thread-safe.
  NameId intern(std::string_view name);
  // The name for an id from this table; "" for an unknown id.
  std::string_view view(NameId id) const;
  size_t size() const { return strings_.size(); }

 private:
  std::deque<std::string> strings_;  // deque: element addresses never move
  std::unordered_map<std::string_view, NameId> index_;
};

}  // namespace gpuutil

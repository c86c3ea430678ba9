// The import's memory budget (see memory_budget.h), the shared
// ImportBudget, and memory sizes as people write them
// (gpuutil/kineto_import.h).
#include "import/source/memory_budget.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <iterator>
#include <string_view>

namespace gpuutil {

bool ImportBudget::charge(uint64_t bytes) {
  uint64_t used = used_bytes_.load(std::memory_order_relaxed);
  for (;;) {
    if (limit_bytes_ != 0 && (bytes > limit_bytes_ || used > limit_bytes_ - bytes)) return false;
    if (used_bytes_.compare_exchange_weak(used, used + bytes, std::memory_order_relaxed)) return true;
  }
}

void ImportBudget::release(uint64_t bytes) { used_bytes_.fetch_sub(bytes, std::memory_order_relaxed); }

namespace {

constexpr uint64_t kMiB = uint64_t{1} << 20;
constexpr uint64_t kGiB = uint64_t{1} << 30;

// Multiplier of a unit suffix (already lower case, without a trailing
// "b"/"ib"), or 0 when it is not one.
uint64_t unit_bytes(std::string_view unit) {
  if (unit.empty()) return 1;
  if (unit.size() != 1) return 0;
  switch (unit[0]) {
    case 'k': return uint64_t{1} << 10;
    case 'm': return uint64_t{1} << 20;
    case 'g': return uint64_t{1} << 30;
    case 't': return uint64_t{1} << 40;
    default: return 0;
  }
}

}  // namespace

bool parse_memory_size(std::string_view text, uint64_t* bytes, std::string* why) {
  std::string lower;
  for (const char c : text) {
    if (c != ' ') lower += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  }
  if (lower == "unlimited" || lower == "none") {
    *bytes = 0;
    return true;
  }
  const std::string shown = "'" + std::string(text) + "'";
  size_t digits = 0;
  while (digits < lower.size() && (std::isdigit(static_cast<unsigned char>(lower[digits])) || lower[digits] == '.')) {
    ++digits;
  }
  std::string_view unit = std::string_view(lower).substr(digits);
  if (unit.size() >= 2 && unit.substr(unit.size() - 2) == "ib") {
    unit.remove_suffix(2);
  } else if (!unit.empty() && unit.back() == 'b') {
    unit.remove_suffix(1);
  }
  const uint64_t multiplier = unit_bytes(unit);
  char* end = nullptr;
  const std::string number = lower.substr(0, digits);
  const double value = number.empty() ? -1 : std::strtod(number.c_str(), &end);
  if (multiplier == 0 || number.empty() || end != number.c_str() + number.size() || !std::isfinite(value)) {
    *why = "not a memory size: " + shown + " (a number with K, M, G or T, e.g. 512M or 2G, or unlimited)";
    return false;
  }
  const double total = value * static_cast<double>(multiplier);
  if (total < static_cast<double>(kMiB)) {
    *why = "memory size " + shown + " is under 1 MiB (for no budget: unlimited)";
    return false;
  }
  if (total >= 1.8e19) {
    *why = "memory size " + shown + " is too large";
    return false;
  }
  *bytes = static_cast<uint64_t>(total);
  return true;
}

std::string format_memory_size(uint64_t bytes) {
  if (bytes == 0) return "unlimited";
  const char* units[] = {"bytes", "KiB", "MiB", "GiB", "TiB"};
  double value = static_cast<double>(bytes);
  size_t u = 0;
  while (u + 1 < std::size(units) && value >= 1024) {
    value /= 1024;
    ++u;
  }
  char text[32];
  if (u == 0 || value == std::floor(value)) {
    std::snprintf(text, sizeof text, "%.0f %s", value, units[u]);
  } else {
    std::snprintf(text, sizeof text, "%.3g %s", value, units[u]);
  }
  return text;
}

namespace replay {

namespace {

// Charges to a shared budget go in slabs, so threads sharing one budget
// touch its atomic once per slab, not once per event.
constexpr uint64_t kSlabBytes = uint64_t{4} << 20;
// What a name costs besides its bytes: its std::string in the table's
// deque and its index entry (node, bucket).
constexpr uint64_t kNameOverheadBytes = 96;
// A thread's entry besides the HostThread: the importer's (pid, tid) maps.
constexpr uint64_t kThreadOverheadBytes = 128;

template <typename T>
uint64_t used_bytes(const std::vector<T>& v) {
  return uint64_t{v.size()} * sizeof(T);
}

// The copy a full vector makes when the next element is pushed.
template <typename T>
uint64_t growth_bytes(const std::vector<T>& v) {
  return v.size() == v.capacity() ? used_bytes(v) : 0;
}

}  // namespace

ImportAccount::ImportAccount(const ImportOptions& options) {
  if (options.shared_budget != nullptr) {
    budget_ = options.shared_budget;
  } else {
    own_ = std::make_unique<ImportBudget>(options.memory_budget_bytes);
    budget_ = own_.get();
  }
}

ImportAccount::~ImportAccount() {
  budget_->release(buffers_charged_);
  if (!keep_store_) budget_->release(store_charged_);
}

bool ImportAccount::charge_buffer(uint64_t bytes) {
  if (!budget_->charge(bytes)) {
    over_ = true;
    return false;
  }
  buffers_charged_ += bytes;
  return true;
}

void ImportAccount::release_buffer(uint64_t bytes) {
  bytes = std::min(bytes, buffers_charged_);
  budget_->release(bytes);
  buffers_charged_ -= bytes;
}

void ImportAccount::forget_store() {
  budget_->release(store_charged_);
  store_charged_ = 0;
  names_counted_ = 0;
  names_bytes_ = 0;
  over_ = false;
}

uint64_t ImportAccount::store_estimate(const EventStore& store) {
  for (; names_counted_ < store.names.size(); ++names_counted_) {
    names_bytes_ += store.names.view(static_cast<NameId>(names_counted_)).size() + kNameOverheadBytes;
  }
  const uint64_t activities = used_bytes(store.activities);
  const uint64_t calls = used_bytes(store.api_calls);
  const uint64_t ranges = used_bytes(store.ranges);
  const uint64_t threads = uint64_t{store.threads.size()} * (sizeof(HostThread) + kThreadOverheadBytes);
  const uint64_t growth =
      std::max({growth_bytes(store.activities), growth_bytes(store.api_calls), growth_bytes(store.ranges)});
  const uint64_t sort = std::max({activities, calls, ranges}) / 2;
  return activities + calls + ranges + names_bytes_ + threads + std::max(growth, sort);
}

bool ImportAccount::charge_store(uint64_t need) {
  const uint64_t more = (need - store_charged_ + kSlabBytes - 1) / kSlabBytes * kSlabBytes;
  // The last slab may not fit whole where the exact need still does.
  const uint64_t charge = budget_->charge(more) ? more : budget_->charge(need - store_charged_) ? need - store_charged_ : 0;
  if (charge == 0) {
    over_ = true;
    return false;
  }
  store_charged_ += charge;
  return true;
}

namespace {

// "; pass max_memory (e.g. 2G) to raise it": a larger size to try, written
// the way the option takes it.
std::string raise_hint(uint64_t limit_bytes) {
  const uint64_t suggest_gib = std::max<uint64_t>(1, (limit_bytes * 2 + (kGiB - 1)) / kGiB);
  return "; pass max_memory (e.g. " + std::to_string(suggest_gib) + "G) to raise it";
}

// "1.01 GB", "32.8 MB": decimal units, as a file's size is usually shown.
std::string decimal_size(uint64_t bytes) {
  char text[48];
  if (bytes >= 1'000'000'000) {
    std::snprintf(text, sizeof text, "%.2f GB", static_cast<double>(bytes) / 1e9);
  } else {
    std::snprintf(text, sizeof text, "%.1f MB", static_cast<double>(bytes) / 1e6);
  }
  return text;
}

}  // namespace

std::string ImportAccount::message(uint64_t events, uint64_t bytes_read) const {
  std::string text = "over the import's memory budget of " + format_memory_size(limit_bytes()) + " after " +
                     std::to_string(events) + " events";
  if (bytes_read > 0) text += " (" + decimal_size(bytes_read) + " read)";
  return text + raise_hint(limit_bytes());
}

std::string ImportAccount::whole_document_message(uint64_t document_bytes) const {
  std::string text = "over the import's memory budget of " + format_memory_size(limit_bytes()) +
                     " reading the document whole";
  if (document_bytes > 0) text += " (" + decimal_size(document_bytes) + ")";
  return text + raise_hint(limit_bytes());
}

}  // namespace replay
}  // namespace gpuutil

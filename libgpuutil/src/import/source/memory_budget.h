// What one import holds, charged against its memory budget
// (ImportOptions::memory_budget_bytes, or a budget shared with other
// imports; gpuutil/kineto_import.h).
//
// Two kinds of charge:
// - buffers (the streaming window, a document read whole): charged before
//   they are allocated or grown, released when freed;
// - the store: estimated from the sizes of what it holds (activities, API
//   calls, ranges, names, threads) plus headroom for the next growth of a
//   full vector (its elements are copied: the old and the new buffer are
//   both resident for a moment) or the final stable sort (a buffer of half
//   the largest vector), whichever is larger. Re-estimated after every
//   event (a few compares), charged to the budget in 4 MiB slabs, so a
//   budget shared across threads sees one atomic operation per slab.
// Once a charge does not fit, the account is over: the importer stops
// storing events and fails with message(). The vectors never grow past the
// budget because the headroom is charged before the push that grows them.
//
// Not thread-safe: one account per import. What the store holds stays
// charged to a shared budget after the import (the store lives on);
// buffers and an own budget go with the account. Internal to the replay
// collector.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "gpuutil/kineto_import.h"

namespace gpuutil::replay {

class ImportAccount {
 public:
  explicit ImportAccount(const ImportOptions& options);
  ~ImportAccount();
  ImportAccount(const ImportAccount&) = delete;
  ImportAccount& operator=(const ImportAccount&) = delete;

  uint64_t limit_bytes() const { return budget_->limit_bytes(); }
  // What the budget has left (everything when it has no limit).
  uint64_t available_bytes() const {
    const uint64_t limit = budget_->limit_bytes();
    const uint64_t used = budget_->used_bytes();
    return limit == 0 ? UINT64_MAX : used >= limit ? 0 : limit - used;
  }
  bool over() const { return over_; }

  // A buffer of `bytes` more (false: it does not fit, the account is over).
  bool charge_buffer(uint64_t bytes);
  void release_buffer(uint64_t bytes);
  // Re-estimates `store` after an event; false once over.
  bool track(const EventStore& store) {
    if (over_) return false;
    const uint64_t need = store_estimate(store);
    return need <= store_charged_ || charge_store(need);
  }
  // The store was discarded (an import starting over): its charge goes.
  void forget_store();
  // The import succeeded: a shared budget keeps the store's charge.
  void keep_store() { keep_store_ = true; }

  // "over the import's memory budget of 768 MiB after N events (B read); pass
  // max_memory (e.g. 2G) to raise it".
  std::string message(uint64_t events, uint64_t bytes_read) const;
  // The same for a document that does not fit to be read whole
  // (`document_bytes`, 0 when unknown).
  std::string whole_document_message(uint64_t document_bytes) const;

 private:
  uint64_t store_estimate(const EventStore& store);
  bool charge_store(uint64_t need);

  std::unique_ptr<ImportBudget> own_;  // when the options share none
  ImportBudget* budget_;
  uint64_t buffers_charged_ = 0;
  uint64_t store_charged_ = 0;  // in slabs, >= the last estimate that fitted
  size_t names_counted_ = 0;     // names whose bytes are in names_bytes_
  uint64_t names_bytes_ = 0;
  bool over_ = false;
  bool keep_store_ = false;
};

}  // namespace gpuutil::replay

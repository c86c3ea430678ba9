// A TraceSource read ahead on a second thread (TraceSource::read_ahead):
// the thread fills fixed blocks from the source's own read, at most a few
// blocks ahead, and TraceSource::read() copies out of them, so inflating
// a gzip stream runs while the caller parses what came before. A fault
// (I/O, corrupt or truncated gzip) is handed over after every byte that
// came before it, with the same one-line error. The blocks are allocated
// once; the hand-over takes a lock once per block, not per byte. Internal
// to the replay collector.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "import/source/trace_source.h"

namespace gpuutil::replay {

struct TraceSource::ReadAhead {
  struct Block {
    std::unique_ptr<char[]> data;
    size_t size_bytes = 0;  // filled
  };

  // Starts the thread reading `source` (which outlives this); throws
  // std::system_error when no thread can be had, std::bad_alloc.
  ReadAhead(TraceSource* source, size_t block_bytes, size_t blocks);
  // Stops and joins the thread (it finishes the block it is filling).
  ~ReadAhead();
  ReadAhead(const ReadAhead&) = delete;
  ReadAhead& operator=(const ReadAhead&) = delete;

  // TraceSource::read()'s contract, served from the blocks.
  bool read(char* dst, size_t want, size_t* got, std::string* error);

 private:
  void produce();

  TraceSource* source_;
  size_t block_bytes_;
  std::mutex mutex_;
  std::condition_variable filled_;  // the reader waits for a block or the end
  std::condition_variable freed_;   // the thread waits for an empty block
  std::deque<Block> full_;          // in document order
  std::vector<Block> empty_;
  size_t front_taken_bytes_ = 0;    // of full_.front(), already copied out
  bool ended_ = false;              // the source has no more bytes
  bool failed_ = false;             // the source failed after the full blocks: error_
  bool stop_ = false;
  std::string error_;
  std::thread thread_;
};

}  // namespace gpuutil::replay

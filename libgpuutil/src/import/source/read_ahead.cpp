// Reading a trace document ahead of the parser on a second thread (see
// read_ahead.h).
#include "import/source/read_ahead.h"

#include <algorithm>
#include <cstring>
#include <new>
#include <system_error>
#include <utility>

namespace gpuutil::replay {

TraceSource::ReadAhead::ReadAhead(TraceSource* source, size_t block_bytes, size_t blocks)
    : source_(source), block_bytes_(block_bytes) {
  empty_.resize(std::max<size_t>(blocks, 2));
  for (Block& b : empty_) b.data.reset(new char[block_bytes_]);
  thread_ = std::thread([this] { produce(); });
}

TraceSource::ReadAhead::~ReadAhead() {
  {
    const std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  freed_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void TraceSource::ReadAhead::produce() {
  for (;;) {
    Block block;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      freed_.wait(lock, [this] { return stop_ || !empty_.empty(); });
      if (stop_) return;
      block = std::move(empty_.back());
      empty_.pop_back();
    }
    size_t got = 0;
    std::string error;
    bool ok = false;
    try {
      ok = source_->read_direct(block.data.get(), block_bytes_, &got, &error);
    } catch (const std::bad_alloc&) {
      error = "out of memory while reading the trace";
    }
    block.size_bytes = got;
    {
      const std::lock_guard<std::mutex> lock(mutex_);
      if (got > 0) full_.push_back(std::move(block));  // before a fault too: it comes after them
      if (!ok) {
        failed_ = true;
        error_ = std::move(error);
      } else {
        ended_ = got < block_bytes_;  // read_direct fills the block unless the document ends
      }
    }
    filled_.notify_one();
    if (!ok || got < block_bytes_) return;
  }
}

bool TraceSource::ReadAhead::read(char* dst, size_t want, size_t* got, std::string* error) {
  size_t done = 0;
  std::unique_lock<std::mutex> lock(mutex_);
  while (done < want) {
    filled_.wait(lock, [this] { return !full_.empty() || ended_ || failed_; });
    if (full_.empty()) {
      if (failed_) {
        *got = done;
        *error = error_;
        return false;
      }
      break;  // ended: the document is shorter than asked
    }
    Block& front = full_.front();
    const size_t take = std::min(want - done, front.size_bytes - front_taken_bytes_);
    std::memcpy(dst + done, front.data.get() + front_taken_bytes_, take);
    done += take;
    front_taken_bytes_ += take;
    if (front_taken_bytes_ == front.size_bytes) {
      empty_.push_back(std::move(front));
      full_.pop_front();
      front_taken_bytes_ = 0;
      freed_.notify_one();
    }
  }
  *got = done;
  return true;
}

}  // namespace gpuutil::replay

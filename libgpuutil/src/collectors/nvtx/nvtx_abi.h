// The C ABI between libgpuutil_nvtx.so (the NVTX injection library, loaded
// by NVTX itself through NVTX_INJECTION64_PATH) and gpuutil's NVTX collector
// (in the core, which dlopens the same file and calls gpuutil_nvtx_abi()).
//
// Per application thread there is one single-producer/single-consumer queue
// of fixed 64-byte entries, claimed on the thread's first NVTX call. A queue
// is a chain of segments (kSegmentEntries entries each) drawn from one
// shared slab: the slab is one mmap made when the library initialises
// (MAP_NORESERVE, committed as pages are first written), and free segments
// sit on a lock-free LIFO stack, so the warm ones are reused and the memory
// touched is the deepest backlog ever held, plus a segment per recording
// thread. A thread's backlog can grow to the whole slab (a burst, or a drain
// thread descheduled on a loaded host); an entry is lost (counted) only when
// no segment is free. The producer is the application thread inside an NVTX
// call: it takes a segment (one CAS) once per kSegmentEntries entries, and
// when it does so with kWakeSegments or more segments undrained it wakes the
// drain thread (one futex wake), so a burst is drained while it lands
// instead of at the next poll. The consumer is the collector's drain thread:
// it follows the chain and gives each segment back once read.
// A thread that ends hands its queue back (a thread_local destructor marks
// it exited); the drain that reads it to the end gives its last segment
// back and marks it free, and the next thread to record takes it (its
// generation goes up, so the consumer knows the owner changed). So 256
// queues serve any number of threads over a run, 256 of them at once.
// Timestamps are raw ticks (rdtsc where the TSC is invariant, else
// CLOCK_MONOTONIC ns); the collector maps them onto the session clock
// (docs/clock.md).
//
// Versioned: the collector refuses an ABI whose version differs.
#pragma once

#include <atomic>
#include <cstdint>

namespace gpuutil::nvtx {

inline constexpr uint32_t kAbiVersion = 4;
// Entries per segment (a power of two): 4096 = 2048 push/pop pairs, 256 KiB.
inline constexpr uint32_t kSegmentEntries = 1u << 12;
// Segments in the slab: 1024 = 256 MiB of address space, committed on use;
// 2M pairs of backlog across all threads (2 s at 1M pairs/s). When the slab
// cannot be mapped at that size (strict overcommit), the library halves it
// down to kMinSegments; Abi::segments says what it got.
inline constexpr uint32_t kSegments = 1u << 10;
inline constexpr uint32_t kMinSegments = 1u << 5;
// A producer that starts a segment with this many undrained wakes the drain.
inline constexpr uint32_t kWakeSegments = 4;
inline constexpr uint32_t kNoSegment = UINT32_MAX;
inline constexpr uint32_t kMaxRings = 256;  // threads that can record at once
inline constexpr uint32_t kNameBytes = 48;       // name prefix kept per push (NUL-terminated)
inline constexpr uint32_t kMaxDomains = 64;
inline constexpr uint32_t kMaxStrings = 4096;  // registered strings (nvtxDomainRegisterStringA)

enum EntryType : uint16_t { kPush = 1, kPop = 2 };

// Ring::state. The consumer reads only live and exited rings; a producer
// takes a free one (free -> taking -> live, resetting it in between).
enum RingState : uint32_t { kRingLive = 0, kRingExited = 1, kRingFree = 2, kRingTaking = 3 };

struct Entry {
  uint64_t ticks;
  uint16_t type;
  uint16_t domain;  // 0 = the default domain, else index into the domain table
  uint32_t reserved;
  char name[kNameBytes];
};
static_assert(sizeof(Entry) == 64, "one cache line per entry");

struct alignas(64) Ring {
  std::atomic<uint64_t> head;  // entries pushed so far; written by the producer only
  uint64_t tid;                // owner's id as CUPTI reports it: (uint32_t)pthread_self()
  uint64_t os_tid;             // owner's OS thread id (gettid)
  std::atomic<uint64_t> dropped;  // pushes/pops lost because no segment was free
  uint32_t first_segment;         // holds entries [0, kSegmentEntries); set by the producer before head moves
  uint32_t write_segment;         // producer only: the segment entry `head` goes to (once head % E != 0)
  std::atomic<uint32_t> state;    // RingState (0 = live: a fresh ring from the zeroed mapping)
  uint32_t generation;            // bumped each time a new thread takes the ring; set before state = live
  alignas(64) std::atomic<uint64_t> tail;  // entries consumed; written by the consumer only (and reset by a taker)
  uint32_t read_segment;                   // consumer only: the segment entry `tail` is read from
};

struct Abi {
  uint32_t version;
  // Set once InitializeInjectionNvtx2 ran (NVTX bound at least one module).
  std::atomic<uint32_t>* initialized;
  // Rings claimed so far ([0, *rings_claimed) are valid; see Ring::state).
  std::atomic<uint32_t>* rings_claimed;
  Ring* rings;
  std::atomic<uint64_t>* threads_without_ring;  // threads that found no ring (more than kMaxRings at once)
  // Domain names by index (index 0 = default domain ""), rows of kNameBytes.
  const char (*domain_names)[kNameBytes];
  std::atomic<uint32_t>* domains_created;
  // 1 when ticks are TSC cycles, 0 when they are CLOCK_MONOTONIC ns.
  int ticks_are_tsc;
  uint64_t (*now_ticks)();
  // Turns recording on/off (off: handlers return at once).
  std::atomic<uint32_t>* recording;
  // The segment slab: segment i's entries are slab[i * kSegmentEntries ...],
  // next_segment[i] is the one after it in its queue (set by the producer
  // before the entry that needs it is published).
  Entry* slab;
  std::atomic<uint32_t>* next_segment;
  uint32_t segments;  // in the slab (kMinSegments..kSegments)
  // Consumer: gives a segment it has finished reading back to the free stack.
  void (*free_segment)(uint32_t segment);
  // Segments free now (approximate), for tests and the memory benchmark.
  uint32_t (*free_segments)();
  // Registrations that found their table full (more than kMaxDomains
  // domains or kMaxStrings registered strings): the ranges using them are
  // named "" or counted in the default domain.
  std::atomic<uint64_t>* registrations_lost;
  // A futex word producers bump (and FUTEX_WAKE) when they start a segment
  // with kWakeSegments or more undrained; the drain thread sleeps on it
  // between polls.
  std::atomic<uint32_t>* wake;
};

// The consumer's side of a queue (one thread at a time: the collector's
// drain). The entry at `pos` of r's queue, read in order (r.tail <= pos <
// head as loaded with acquire): at a segment's first entry it moves to that
// segment and gives the one before back to the free stack.
inline const Entry& consume_entry(const Abi& abi, Ring& r, uint64_t pos) {
  const uint32_t offset = static_cast<uint32_t>(pos & (kSegmentEntries - 1));
  if (offset == 0) {
    if (pos == 0) {
      r.read_segment = r.first_segment;
    } else {
      const uint32_t done = r.read_segment;
      r.read_segment = abi.next_segment[done].load(std::memory_order_relaxed);
      abi.free_segment(done);
    }
  }
  return abi.slab[static_cast<uint64_t>(r.read_segment) * kSegmentEntries + offset];
}

// The consumer: marks everything up to `head` read, unread (entries from
// before a session), freeing the segments it passes; one step per segment.
inline void consume_to(const Abi& abi, Ring& r, uint64_t head) {
  uint64_t tail = r.tail.load(std::memory_order_relaxed);
  while (tail != head) {
    (void)consume_entry(abi, r, tail);
    const uint64_t next_start = (tail | (kSegmentEntries - 1)) + 1;
    tail = head < next_start ? head : next_start;
  }
  r.tail.store(tail, std::memory_order_release);
}

}  // namespace gpuutil::nvtx

extern "C" const gpuutil::nvtx::Abi* gpuutil_nvtx_abi();

// The C ABI between libgpuutil_nvtx.so (the NVTX injection library, loaded
// by NVTX itself through NVTX_INJECTION64_PATH) and gpuutil's NVTX collector
// (in the core, which dlopens the same file and calls gpuutil_nvtx_abi()).
//
// Per application thread there is one single-producer/single-consumer ring
// of fixed 64-byte entries, claimed from a preallocated slab on the thread's
// first NVTX call (no allocation on the application thread; the slab is one
// mmap made when the library initialises, MAP_NORESERVE: pages are committed
// only as a ring's entries are first written, so a ring costs memory only up
// to the deepest backlog it ever held, at most ring_entries x 64 bytes). The
// producer is the application thread inside an NVTX call; the consumer is
// the collector's drain thread. A producer whose push makes its ring half
// full wakes the drain thread (one futex wake, only at that crossing), so a
// burst is drained while it lands instead of at the next poll.
// Timestamps are raw ticks (rdtsc where the TSC is invariant, else
// CLOCK_MONOTONIC ns); the collector maps them onto the session clock
// (docs/clock.md).
//
// Versioned: the collector refuses an ABI whose version differs.
#pragma once

#include <atomic>
#include <cstdint>

namespace gpuutil::nvtx {

inline constexpr uint32_t kAbiVersion = 2;
// Entries per ring (power of two): 262144 = 128k push/pop pairs, 16 MiB of
// address space per ring, committed on use. When the slab cannot be mapped
// at that size (strict overcommit), the library halves it down to
// kMinRingEntries; Abi::ring_entries says what it got.
inline constexpr uint32_t kRingEntries = 1u << 18;
inline constexpr uint32_t kMinRingEntries = 1u << 13;
inline constexpr uint32_t kMaxRings = 256;  // threads that can record
inline constexpr uint32_t kNameBytes = 48;       // name prefix kept per push (NUL-terminated)
inline constexpr uint32_t kMaxDomains = 64;

enum EntryType : uint16_t { kPush = 1, kPop = 2 };

struct Entry {
  uint64_t ticks;
  uint16_t type;
  uint16_t domain;  // 0 = the default domain, else index into the domain table
  uint32_t reserved;
  char name[kNameBytes];
};
static_assert(sizeof(Entry) == 64, "one cache line per entry");

struct alignas(64) Ring {
  std::atomic<uint64_t> head;  // written by the producer thread only
  uint64_t tid;                // owner's id as CUPTI reports it: (uint32_t)pthread_self()
  uint64_t os_tid;             // owner's OS thread id (gettid)
  std::atomic<uint64_t> dropped;  // pushes/pops lost because the ring was full
  Entry* entries;                 // ring_entries of them, in the slab
  alignas(64) std::atomic<uint64_t> tail;  // written by the consumer only
};

struct Abi {
  uint32_t version;
  // Set once InitializeInjectionNvtx2 ran (NVTX bound at least one module).
  std::atomic<uint32_t>* initialized;
  // Rings claimed so far ([0, *rings_claimed) are valid).
  std::atomic<uint32_t>* rings_claimed;
  Ring* rings;
  std::atomic<uint64_t>* threads_without_ring;  // threads beyond kMaxRings
  // Domain names by index (index 0 = default domain ""), rows of kNameBytes.
  const char (*domain_names)[kNameBytes];
  std::atomic<uint32_t>* domains_created;
  // 1 when ticks are TSC cycles, 0 when they are CLOCK_MONOTONIC ns.
  int ticks_are_tsc;
  uint64_t (*now_ticks)();
  // Turns recording on/off (off: handlers return at once).
  std::atomic<uint32_t>* recording;
  // Entries per ring (a power of two, kMinRingEntries..kRingEntries).
  uint32_t ring_entries;
  // A futex word producers bump (and FUTEX_WAKE) when a push makes their
  // ring half full; the drain thread sleeps on it between polls.
  std::atomic<uint32_t>* wake;
};

}  // namespace gpuutil::nvtx

extern "C" const gpuutil::nvtx::Abi* gpuutil_nvtx_abi();

// The C ABI between libgpuutil_nvtx.so (the NVTX injection library, loaded
// by NVTX itself through NVTX_INJECTION64_PATH) and gpuutil's NVTX collector
// (in the core, which dlopens the same file and calls gpuutil_nvtx_abi()).
//
// Per application thread there is one single-producer/single-consumer ring
// of fixed 64-byte entries, claimed from a preallocated slab on the thread's
// first NVTX call (no allocation on the application thread; the slab is one
// mmap made when the library initialises). The producer is the application
// thread inside an NVTX call; the consumer is the collector's drain thread.
// Timestamps are raw ticks (rdtsc where the TSC is invariant, else
// CLOCK_MONOTONIC ns); the collector maps them onto the session clock
// (docs/clock.md).
//
// Versioned: the collector refuses an ABI whose version differs.
#pragma once

#include <atomic>
#include <cstdint>

namespace gpuutil::nvtx {

inline constexpr uint32_t kAbiVersion = 1;
inline constexpr uint32_t kRingEntries = 8192;  // per thread, power of two
inline constexpr uint32_t kMaxRings = 256;       // threads that can record
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
  alignas(64) std::atomic<uint64_t> tail;  // written by the consumer only
  Entry entries[kRingEntries];
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
};

}  // namespace gpuutil::nvtx

extern "C" const gpuutil::nvtx::Abi* gpuutil_nvtx_abi();

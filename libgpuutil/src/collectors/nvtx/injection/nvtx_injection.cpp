// libgpuutil_nvtx.so: gpuutil's NVTX injection library.
//
// NVTX (header-only in every binary: torch, NCCL, user code) dlopens the
// library named by NVTX_INJECTION64_PATH on its first call and calls
// InitializeInjectionNvtx2. We overwrite the CORE slots RangePushA,
// RangePushEx, RangePop and the CORE2 slots DomainCreateA, DomainRangePushEx,
// DomainRangePop, DomainRegisterStringA with handlers that append one entry
// to the calling thread's queue (nvtx_abi.h): a tick read, a bounded name
// copy, one release store. No allocation, no lock, no syscall on this path
// (a thread's first call claims its ring, or takes one a finished thread
// left: a CAS or a few, and one gettid; once per
// segment the producer pops a free segment, one CAS, and if the drain is
// kWakeSegments behind wakes it, one futex wake).
// Slots we do not fill (marks, NameOsThread, ...) stay no-ops.
//
// Registered strings and domains are interned into fixed tables on first
// registration (rare: NCCL registers a domain once).
#include <pthread.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>
#include <linux/futex.h>
#include <sys/syscall.h>

#include <cstring>
#include <fstream>
#include <string>

#include "collectors/nvtx/nvtx_abi.h"
#include "nvtx3/nvToolsExt.h"

#if defined(__x86_64__)
#include <x86intrin.h>
#endif

namespace gpuutil::nvtx {
namespace {

std::atomic<uint32_t> g_initialized{0};
std::atomic<uint32_t> g_rings_claimed{0};
std::atomic<uint64_t> g_threads_without_ring{0};
std::atomic<uint32_t> g_domains_created{1};  // 0 = default domain
std::atomic<uint32_t> g_strings{0};
std::atomic<uint32_t> g_recording{0};  // the collector turns it on
std::atomic<uint32_t> g_wake{0};
std::atomic<uint64_t> g_registrations_lost{0};  // a domain or string table was full       // futex word: bumped when a producer is kWakeSegments ahead
Ring* g_rings = nullptr;
Entry* g_slab = nullptr;
uint32_t g_segments = 0;
std::atomic<uint32_t>* g_next_segment = nullptr;  // per segment: the next one of its queue
// The free-segment stack (Treiber): low 32 bits = top segment + 1 (0 =
// empty), high 32 bits = a tag bumped by every change (no ABA). g_free_link
// holds each free segment's successor on the stack (+ 1, 0 = none).
std::atomic<uint64_t> g_free_top{0};
std::atomic<uint32_t>* g_free_link = nullptr;
std::atomic<uint32_t> g_free_count{0};
char g_domain_names[kMaxDomains][kNameBytes];
char g_strings_table[kMaxStrings][kNameBytes];
int g_tsc = 0;

thread_local Ring* t_ring = nullptr;
thread_local bool t_no_ring = false;

uint64_t mono_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return uint64_t(ts.tv_sec) * 1'000'000'000u + uint64_t(ts.tv_nsec);
}

uint64_t now_ticks() {
#if defined(__x86_64__)
  if (g_tsc) return __rdtsc();
#endif
  return mono_ns();
}

bool tsc_invariant() {
#if defined(__x86_64__)
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("flags", 0) == 0) {
      return line.find(" constant_tsc") != std::string::npos && line.find(" nonstop_tsc") != std::string::npos;
    }
  }
#endif
  return false;
}

// Producers (any application thread): a free segment, or kNoSegment.
uint32_t pop_segment() {
  uint64_t top = g_free_top.load(std::memory_order_acquire);
  for (;;) {
    const uint32_t first = static_cast<uint32_t>(top);
    if (first == 0) return kNoSegment;
    const uint32_t below = g_free_link[first - 1].load(std::memory_order_relaxed);
    const uint64_t next = ((top >> 32) + 1) << 32 | below;
    if (g_free_top.compare_exchange_weak(top, next, std::memory_order_acq_rel, std::memory_order_acquire)) {
      g_free_count.fetch_sub(1, std::memory_order_relaxed);
      return first - 1;
    }
  }
}

// The consumer (the drain thread), and setup: puts a segment on the stack.
void push_segment(uint32_t segment) {
  if (segment >= g_segments) return;
  uint64_t top = g_free_top.load(std::memory_order_relaxed);
  for (;;) {
    g_free_link[segment].store(static_cast<uint32_t>(top), std::memory_order_relaxed);
    const uint64_t next = ((top >> 32) + 1) << 32 | (segment + 1);
    if (g_free_top.compare_exchange_weak(top, next, std::memory_order_release, std::memory_order_relaxed)) {
      g_free_count.fetch_add(1, std::memory_order_relaxed);
      return;
    }
  }
}

uint32_t free_segments() { return g_free_count.load(std::memory_order_relaxed); }

void setup_once() {
  static const bool done = [] {
    void* p = mmap(nullptr, sizeof(Ring) * kMaxRings, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    // The segments: as many as the system lets us reserve (committed on use).
    for (uint32_t n = kSegments; p != MAP_FAILED && n >= kMinSegments; n /= 2) {
      const size_t entries_bytes = size_t(n) * kSegmentEntries * sizeof(Entry);
      const size_t links_bytes = size_t(n) * 2 * sizeof(std::atomic<uint32_t>);
      void* e = mmap(nullptr, entries_bytes + links_bytes, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
      if (e != MAP_FAILED) {
        g_slab = static_cast<Entry*>(e);
        auto* links = reinterpret_cast<std::atomic<uint32_t>*>(static_cast<char*>(e) + entries_bytes);
        g_next_segment = links;
        g_free_link = links + n;
        g_segments = n;
        break;
      }
    }
    g_rings = p == MAP_FAILED || !g_slab ? nullptr : static_cast<Ring*>(p);
    // Highest first, so the stack hands out segment 0, 1, ... (low addresses first).
    for (uint32_t i = g_segments; g_rings && i > 0; --i) push_segment(i - 1);
    g_tsc = tsc_invariant() ? 1 : 0;
    std::memset(g_domain_names, 0, sizeof(g_domain_names));
    // A forked child (a DataLoader worker) has no drain thread: it records
    // nothing, instead of filling its copy of the slab with entries no one reads.
    pthread_atfork(nullptr, nullptr, [] { g_recording.store(0, std::memory_order_relaxed); });
    return true;
  }();
  (void)done;
}

// Marks the thread's ring exited when the thread ends, for the drain to
// read to the end and free. An NVTX call later on that thread (from
// another thread_local's destructor) is not recorded: the ring may already
// belong to another thread.
struct RingExit {
  Ring* ring = nullptr;
  ~RingExit() {
    t_ring = nullptr;
    t_no_ring = true;
    if (ring) ring->state.store(kRingExited, std::memory_order_release);
  }
};

// A ring a finished thread left and the drain freed, reset for this thread;
// or nullptr.
Ring* take_free_ring() {
  const uint32_t n = g_rings_claimed.load(std::memory_order_acquire);
  for (uint32_t i = 0; i < n && i < kMaxRings; ++i) {
    Ring& r = g_rings[i];
    uint32_t expected = kRingFree;
    if (r.state.load(std::memory_order_relaxed) != kRingFree ||
        !r.state.compare_exchange_strong(expected, kRingTaking, std::memory_order_acquire)) {
      continue;
    }
    // The consumer is done with it (it set free after its last read) and
    // reads it again only once it is live (release store in my_ring).
    r.head.store(0, std::memory_order_relaxed);
    r.tail.store(0, std::memory_order_relaxed);
    r.dropped.store(0, std::memory_order_relaxed);
    r.first_segment = r.write_segment = r.read_segment = kNoSegment;
    ++r.generation;
    return &r;
  }
  return nullptr;
}

Ring* my_ring() {
  if (t_ring) return t_ring;
  if (t_no_ring || !g_rings) return nullptr;
  Ring* r = take_free_ring();
  const bool reused = r != nullptr;
  if (!reused) {
    uint32_t want = g_rings_claimed.load(std::memory_order_relaxed);
    while (want < kMaxRings && !g_rings_claimed.compare_exchange_weak(want, want + 1)) {
    }
    if (want >= kMaxRings) {
      t_no_ring = true;
      g_threads_without_ring.fetch_add(1, std::memory_order_relaxed);
      return nullptr;
    }
    r = &g_rings[want];
  }
  // CUPTI's API records carry (uint32_t)pthread_self() as threadId; the same
  // key puts NVTX ranges and CUDA API calls on one thread (docs/clock.md).
  r->tid = static_cast<uint32_t>(pthread_self());
  r->os_tid = static_cast<uint64_t>(syscall(SYS_gettid));
  if (reused) r->state.store(kRingLive, std::memory_order_release);
  static thread_local RingExit exit;  // registers its destructor on this thread's first call only
  exit.ring = r;
  t_ring = r;
  return r;
}

inline void record(uint16_t type, uint16_t domain, const char* name) {
  if (!g_recording.load(std::memory_order_relaxed)) return;
  Ring* r = my_ring();
  if (!r) return;
  const uint64_t head = r->head.load(std::memory_order_relaxed);
  const uint32_t offset = static_cast<uint32_t>(head & (kSegmentEntries - 1));
  if (offset == 0) {
    // The entry starts a segment (once per kSegmentEntries): take one. The
    // consumer reads first_segment / next_segment only after it sees head
    // past this entry (the release store below).
    const uint32_t seg = pop_segment();
    if (seg == kNoSegment) {
      r->dropped.fetch_add(1, std::memory_order_relaxed);
      return;
    }
    g_next_segment[seg].store(kNoSegment, std::memory_order_relaxed);
    if (head == 0) {
      r->first_segment = seg;
    } else {
      g_next_segment[r->write_segment].store(seg, std::memory_order_relaxed);
    }
    r->write_segment = seg;
    const uint64_t undrained = head - r->tail.load(std::memory_order_acquire);
    if (undrained >= uint64_t(kWakeSegments) * kSegmentEntries) {  // the drain is behind: wake it now
      g_wake.fetch_add(1, std::memory_order_release);
      syscall(SYS_futex, reinterpret_cast<uint32_t*>(&g_wake), FUTEX_WAKE_PRIVATE, 1, nullptr, nullptr, 0);
    }
  }
  Entry& e = g_slab[size_t(r->write_segment) * kSegmentEntries + offset];
  e.ticks = now_ticks();
  e.type = type;
  e.domain = domain;
  if (name) {
    const size_t n = strnlen(name, kNameBytes - 1);
    std::memcpy(e.name, name, n);
    e.name[n] = '\0';
  } else if (type == kPush) {
    e.name[0] = '\0';
  }
  r->head.store(head + 1, std::memory_order_release);
}

uint16_t domain_index(nvtxDomainHandle_t d) {
  const uintptr_t v = reinterpret_cast<uintptr_t>(d);
  return v < kMaxDomains ? static_cast<uint16_t>(v) : 0;
}

const char* message_of(const nvtxEventAttributes_t* a) {
  if (!a) return nullptr;
  switch (a->messageType) {
    case NVTX_MESSAGE_TYPE_ASCII:
      return a->message.ascii;
    case NVTX_MESSAGE_TYPE_REGISTERED: {
      const uintptr_t v = reinterpret_cast<uintptr_t>(a->message.registered);
      return (v >= 1 && v <= kMaxStrings) ? g_strings_table[v - 1] : nullptr;
    }
    default:
      return "<non-ascii NVTX message>";
  }
}

int NVTX_API push_a(const char* message) {
  record(kPush, 0, message);
  return 0;
}
int NVTX_API push_ex(const nvtxEventAttributes_t* a) {
  record(kPush, 0, message_of(a));
  return 0;
}
int NVTX_API pop() {
  record(kPop, 0, nullptr);
  return 0;
}
int NVTX_API domain_push_ex(nvtxDomainHandle_t d, const nvtxEventAttributes_t* a) {
  record(kPush, domain_index(d), message_of(a));
  return 0;
}
int NVTX_API domain_pop(nvtxDomainHandle_t d) {
  record(kPop, domain_index(d), nullptr);
  return 0;
}

// Rare calls (once per domain / string): a short scan of fixed tables.
std::atomic_flag g_table_lock = ATOMIC_FLAG_INIT;

nvtxDomainHandle_t NVTX_API domain_create_a(const char* name) {
  while (g_table_lock.test_and_set(std::memory_order_acquire)) {
  }
  const uint32_t n = g_domains_created.load();
  uint32_t found = 0;
  for (uint32_t i = 1; i < n; ++i) {
    if (std::strncmp(g_domain_names[i], name ? name : "", kNameBytes - 1) == 0) found = i;
  }
  if (found == 0 && n < kMaxDomains) {
    std::strncpy(g_domain_names[n], name ? name : "", kNameBytes - 1);
    found = n;
    g_domains_created.store(n + 1, std::memory_order_release);
  } else if (found == 0) {
    g_registrations_lost.fetch_add(1, std::memory_order_relaxed);  // its ranges go to the default domain
  }
  g_table_lock.clear(std::memory_order_release);
  return reinterpret_cast<nvtxDomainHandle_t>(static_cast<uintptr_t>(found));
}

nvtxStringHandle_t NVTX_API register_string_a(nvtxDomainHandle_t, const char* s) {
  while (g_table_lock.test_and_set(std::memory_order_acquire)) {
  }
  const uint32_t n = g_strings.load();
  uint32_t found = 0;
  for (uint32_t i = 0; i < n && !found; ++i) {
    if (std::strncmp(g_strings_table[i], s ? s : "", kNameBytes - 1) == 0) found = i + 1;
  }
  if (!found && n < kMaxStrings) {
    std::strncpy(g_strings_table[n], s ? s : "", kNameBytes - 1);
    g_strings.store(n + 1, std::memory_order_release);
    found = n + 1;
  } else if (!found) {
    g_registrations_lost.fetch_add(1, std::memory_order_relaxed);  // ranges naming it get ""
  }
  g_table_lock.clear(std::memory_order_release);
  return reinterpret_cast<nvtxStringHandle_t>(static_cast<uintptr_t>(found));
}

template <typename F>
void put(NvtxFunctionTable table, unsigned size, unsigned slot, F fn) {
  if (table && slot < size && table[slot]) *table[slot] = reinterpret_cast<NvtxFunctionPointer>(fn);
}

Abi g_abi{};

}  // namespace
}  // namespace gpuutil::nvtx

using namespace gpuutil::nvtx;

extern "C" __attribute__((visibility("default"))) int InitializeInjectionNvtx2(NvtxGetExportTableFunc_t get) {
  setup_once();
  if (!get) return 0;
  const auto* cb = static_cast<const NvtxExportTableCallbacks*>(get(NVTX_ETID_CALLBACKS));
  if (!cb || !cb->GetModuleFunctionTable) return 0;
  NvtxFunctionTable core = nullptr, core2 = nullptr;
  unsigned core_n = 0, core2_n = 0;
  if (cb->GetModuleFunctionTable(NVTX_CB_MODULE_CORE, &core, &core_n)) {
    put(core, core_n, NVTX_CBID_CORE_RangePushA, &push_a);
    put(core, core_n, NVTX_CBID_CORE_RangePushEx, &push_ex);
    put(core, core_n, NVTX_CBID_CORE_RangePop, &pop);
  }
  if (cb->GetModuleFunctionTable(NVTX_CB_MODULE_CORE2, &core2, &core2_n)) {
    put(core2, core2_n, NVTX_CBID_CORE2_DomainCreateA, &domain_create_a);
    put(core2, core2_n, NVTX_CBID_CORE2_DomainRangePushEx, &domain_push_ex);
    put(core2, core2_n, NVTX_CBID_CORE2_DomainRangePop, &domain_pop);
    put(core2, core2_n, NVTX_CBID_CORE2_DomainRegisterStringA, &register_string_a);
  }
  g_initialized.fetch_add(1, std::memory_order_acq_rel);
  return 1;
}

extern "C" __attribute__((visibility("default"))) const Abi* gpuutil_nvtx_abi() {
  setup_once();
  g_abi.version = kAbiVersion;
  g_abi.initialized = &g_initialized;
  g_abi.rings_claimed = &g_rings_claimed;
  g_abi.rings = g_rings;
  g_abi.threads_without_ring = &g_threads_without_ring;
  g_abi.domain_names = g_domain_names;
  g_abi.domains_created = &g_domains_created;
  g_abi.ticks_are_tsc = g_tsc;
  g_abi.now_ticks = &now_ticks;
  g_abi.recording = &g_recording;
  g_abi.slab = g_slab;
  g_abi.next_segment = g_next_segment;
  g_abi.segments = g_segments;
  g_abi.free_segment = &push_segment;
  g_abi.free_segments = &free_segments;
  g_abi.registrations_lost = &g_registrations_lost;
  g_abi.wake = &g_wake;
  return &g_abi;
}

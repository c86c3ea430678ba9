// What the drain thread knows about the streams calls name by handle: the
// CUPTI stream id and context id each handle stands for, and which streams
// are being captured into a graph.
//
// A call learnt at API exit names its stream by a raw handle (StreamRef:
// an explicit CUstream, the legacy default stream of the call's context,
// or the calling thread's per-thread default stream); activity records
// name it by CUPTI's stream id and context id. The registry maps one to
// the other without calling CUPTI:
//  - created(): a resource callback's STREAM_CREATED, which read the id and
//    context while the stream was valid (api_callbacks.h); destroyed()
//    forgets the handle, so a recycled handle names the new stream only;
//  - learn(): the device record of a call on that handle (a stream created
//    before gpuutil subscribed, the legacy and per-thread default streams,
//    which have no creation callback).
// The context id is the stream's, not the calling thread's current one: on
// CUDA 13 a launch may target a stream of a device that is not current.
//
// Capture is a property of a stream (cudaStreamBeginCapture(stream)): a
// launch into a capturing stream from any thread is recorded into the graph
// and never runs. A stream joins a capture when it waits on an event
// recorded on a capturing stream (cross-stream capture: the fork/join
// pattern of side streams), until that capture ends. A capture mark or a
// launch whose stream is unknown (its parameters carry none) falls back to
// the calling thread, as before.
//
// Bounded: at most kMaxHandles handles, kMaxKeys capturing streams and
// kMaxEvents events; past that the oldest knowledge is dropped (it is
// learnt again from records). Vendor-free. Contract: used by one thread
// (the collector's drain thread, through the LaunchTracker).
#pragma once

#include <cstddef>
#include <cstdint>
#include <unordered_map>
#include <vector>

namespace gpuutil::cupti {

constexpr uint32_t kUnknownStream = UINT32_MAX;

// Which stream a learnt call enqueued on, as its parameters say.
enum StreamKind : uint8_t {
  kStreamNone = 0,       // the call carries no stream gpuutil reads
  kStreamExplicit = 1,   // a stream handle (StreamRef::handle)
  kStreamLegacy = 2,     // the legacy default stream of its context (NULL, cudaStreamLegacy)
  kStreamPerThread = 3,  // the calling thread's per-thread default stream (cudaStreamPerThread, NULL in _ptsz calls)
};

// A call's stream before it is resolved: raw handles, never dereferenced.
struct StreamRef {
  uint8_t kind = kStreamNone;  // StreamKind
  uint64_t handle = 0;         // the CUstream (kStreamExplicit)
  uint64_t context = 0;        // the CUcontext of the call
};

struct ResolvedStream {
  uint32_t stream = kUnknownStream;  // CUPTI's stream id
  uint32_t context = 0;              // CUPTI's context id of the stream (0: unknown)
};

class StreamRegistry {
 public:
  static constexpr size_t kMaxHandles = size_t(1) << 16;
  static constexpr size_t kMaxKeys = 4096;
  static constexpr size_t kMaxEvents = size_t(1) << 14;

  // A stream handle created with (id, context id); `stream` kUnknownStream
  // when CUPTI could not say.
  void created(uint64_t handle, uint32_t stream, uint32_t context);
  void destroyed(uint64_t handle);
  // A device record of a call on `ref` (made by `thread`) ran on (stream, context).
  void learn(const StreamRef& ref, uint64_t thread, uint32_t stream, uint32_t context);
  ResolvedStream resolve(const StreamRef& ref, uint64_t thread) const;

  // Stream capture on `ref` (the calling thread's when kStreamNone) from begin_ns.
  void capture_begin(const StreamRef& ref, uint64_t thread, int64_t begin_ns);
  // Ends it at end_ns; returns the capture's keys (its stream and the
  // streams that joined it) and its start, so launches inside can be dropped.
  struct Ended {
    int64_t begin_ns = INT64_MIN;
    std::vector<uint64_t> keys;
  };
  Ended capture_end(const StreamRef& ref, uint64_t thread, int64_t end_ns);
  // Whether a call on `ref` by `thread` at t_ns went into a graph.
  bool captured(const StreamRef& ref, uint64_t thread, int64_t t_ns) const;
  // cudaEventRecord(event, ref) at t_ns; cudaStreamWaitEvent(ref, event) at t_ns.
  void event_recorded(uint64_t event, const StreamRef& ref, uint64_t thread, int64_t t_ns);
  void stream_waited(uint64_t event, const StreamRef& ref, uint64_t thread, int64_t t_ns);
  // The key a call's stream is captured under (its stream; the thread when unknown).
  static uint64_t key(const StreamRef& ref, uint64_t thread);
  // The key of calls of unknown stream made by `thread` during a capture it began.
  static uint64_t thread_key(uint64_t thread);

  void clear();

 private:
  struct Capture {
    int64_t begin_ns;
    int64_t end_ns;   // INT64_MAX while open
    uint64_t origin;  // the key whose BeginCapture opened it
  };
  Capture* open_capture(uint64_t k, int64_t t_ns);
  const Capture* capture_at(uint64_t k, int64_t t_ns) const;

  std::unordered_map<uint64_t, ResolvedStream> handles_;   // explicit stream handles
  std::unordered_map<uint64_t, ResolvedStream> defaults_;  // legacy / per-thread default streams, by key
  std::unordered_map<uint64_t, std::vector<Capture>> captures_;  // by key, recent first-to-last
  struct EventMark {
    uint64_t origin;  // the capture's origin key
    int64_t t_ns;
  };
  std::unordered_map<uint64_t, EventMark> events_;  // events recorded on a capturing stream
};

}  // namespace gpuutil::cupti

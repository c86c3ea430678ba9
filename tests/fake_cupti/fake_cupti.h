/* Control API of the fake CUPTI (test-only shared library libfake_cupti.so).
 *
 * The library is a test double for libcupti that behaves the way the real
 * library does at the points where gpuutil's collector can go wrong
 * (docs/live-collection.md, "What the fake reproduces"):
 *
 *  - CUPTI's entry points with their real signatures: the activity API
 *    (register callbacks, enable/disable kinds, per-callback-id enables of
 *    runtime and driver APIs, flush, records, dropped counts, thread-id
 *    type, timestamp callback), cuptiSubscribe/_v2/cuptiUnsubscribe (one
 *    subscriber at a time), and cuptiGetCallbackName with the real callback
 *    ids and names of the CUDA headers it was built against.
 *  - A simulated device on CLOCK_MONOTONIC, gpuutil's session clock (times
 *    given to the fake are on it); records carry the client's clock: the
 *    registered timestamp callback, else CLOCK_REALTIME like CUPTI. A kernel, copy or memset
 *    record is complete only once the device has finished it (its end time
 *    has passed). A default flush (flag 0) closes every non-empty buffer and
 *    delivers only buffers whose records are all complete; the rest wait for
 *    a later flush or the fake's worker thread. A forced flush delivers
 *    everything, unfinished records with zero end (and start) timestamps.
 *  - Where device records go: FAKE_CUPTI_DEVICE_RECORDS_IN_THREAD_BUFFER
 *    (default, CUDA 13's per-thread buffers): reserved at launch in the
 *    launching thread's buffer, right after its API record;
 *    FAKE_CUPTI_DEVICE_RECORDS_IN_DEVICE_BUFFER (per-device buffers): written
 *    at completion, in completion order, into the device's buffer.
 *  - API records carry the calling thread's id as CUPTI does:
 *    (uint32_t)pthread_self() (CUPTI_ACTIVITY_THREAD_ID_TYPE_DEFAULT) or the
 *    OS tid (TYPE_SYSTEM). No control call lets a test choose it.
 *  - Buffer callbacks are never called with the fake's lock held: buffers
 *    are requested on the thread that needs one, and delivered on the fake's
 *    worker thread or on the thread that flushes. A completed buffer goes to
 *    whichever client is registered at delivery time.
 *  - A second client (like Kineto under torch.profiler): re-registers the
 *    buffer callbacks, enables its kinds, and at its stop disables them and
 *    force-flushes; it rejects buffers it did not allocate, as Kineto does.
 *  - CUDA graphs: one API record, many device records with its correlation
 *    id; with `graph_correlation_bug` and version 13.0, graph records carry
 *    a stale correlation id in every activity session after the first.
 *  - A small CUDA driver API surface (cuInit, cuModuleLoadData,
 *    cuLaunchKernel, copies, syncs, ...) with libcuda's exported names, so a
 *    program written against libcuda can run on the simulated device.
 *  - What the headers promise besides: bufferRequested's maxNumRecords (a
 *    buffer is handed over once it holds that many records), a failed call's
 *    API record carries its returnValue and enqueues nothing, peer copies
 *    arrive as MEMCPY2 records (only while that kind is enabled),
 *    cuptiActivitySetAttribute(PER_THREAD_ACTIVITY_BUFFER), cuptiFinalize.
 *  - The callback API on the subscription: cuptiEnableCallback per (domain,
 *    callback id); the subscriber's callback runs on the calling thread at
 *    API enter and exit with CUpti_CallbackData (correlationId,
 *    correlationData, the return value, contextUid = device + 1 as activity
 *    records' contextId, context = the device's context handle,
 *    symbolName = the kernel's name, and the call's generated *_params
 *    struct: the stream handle of launches, copies, memsets and graph
 *    launches at its real offset, a copy's or memset's byte count), and
 *    cuptiGetStreamIdEx mapping those handles to the stream ids the
 *    activity records carry (fake_streams.cpp).
 *  - What the headers leave open is a matrix of settings, not one choice
 *    (fake_cupti_matrix below; docs/live-collection.md, "The fake's
 *    matrix"): chosen with fake_cupti_configure() or, for a process that
 *    loads the fake without calling it (a Python test's subprocess), with
 *    GPUUTIL_FAKE_CUPTI_MATRIX="seal=0,records=thread,buffers=global,
 *    api=exit,skew=3000,hold=1,client=teardown+per_thread_reset" read when
 *    the library loads. All defaults: what the fake did before the matrix.
 *
 * Buffer layout is the fake's own (a real client only walks buffers with
 * cuptiActivityGetNextRecord): each record is an 8-byte header {size, magic}
 * followed by the record struct, padded to 8 bytes.
 *
 * Tests load the library through GPUUTIL_CUPTI_LIBRARY, the product's run-time
 * loading path for the real libcupti, and drive it through this C API.
 */
#ifndef GPUUTIL_FAKE_CUPTI_H
#define GPUUTIL_FAKE_CUPTI_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define FAKE_CUPTI_DEVICE_RECORDS_IN_THREAD_BUFFER 0
#define FAKE_CUPTI_DEVICE_RECORDS_IN_DEVICE_BUFFER 1

typedef struct fake_cupti_config {
  uint32_t version;         /* cuptiGetVersion; 0 = the compiled CUPTI_API_VERSION; 19..28 = CUPTI 12.x numbering */
  int enable_error;         /* CUptiResult for cuptiActivityEnable; 0 = CUPTI_SUCCESS */
  int enable_error_kind;    /* fail only this kind (0 = any kind) */
  int timestamp_error;      /* CUptiResult for cuptiActivityRegisterTimestampCallback (999: no driver) */
  int subscribe_error;      /* CUptiResult for cuptiSubscribe(_v2) even when nobody else subscribed (Nsight) */
  int device_records;       /* FAKE_CUPTI_DEVICE_RECORDS_IN_THREAD_BUFFER or _IN_DEVICE_BUFFER */
  int graph_correlation_bug;  /* emulate CUPTI 13.0's graph correlation ids (needs a 13.0 version) */
  int64_t driver_kernel_ns; /* duration of a kernel launched through the fake driver API; 0 = 10 us */
  int emit_threads;         /* streaming scenario: real threads emitting at once; 0 = 1 */
  /* faults: how many to inject (each once, at the next opportunity) */
  int null_buffers;         /* complete a NULL buffer */
  int overlong_buffers;     /* complete with validSize > size */
  int truncated_buffers;    /* complete with the last record cut in half */
  int zero_timestamps;      /* kernel records with start = 0 */
  int unknown_kinds;        /* records of a kind no client decodes */
  int out_of_order;         /* deliver a batch of buffers newest first */
  uint64_t dropped_records; /* reported by cuptiActivityGetNumDroppedRecords */
  int flush_stalls;         /* the next N cuptiActivityFlushAll calls first sleep flush_stall_ms, holding no fake
                               lock: the client's flushing (drain) thread held off the CPU by a loaded host */
  int64_t flush_stall_ms;
  int lose_records;         /* the next N kernel records are never written and never reported (lost with a buffer) */
  int drop_records;         /* the next N kernel records are dropped, and reported by cuptiActivityGetNumDroppedRecords */
  int no_timing_records;    /* the next N kernel records carry start = end = 0 ("no timing information could be
                               collected for lack of device memory", cupti_activity.h), delivered as usual */
} fake_cupti_config;

typedef struct fake_cupti_stats {
  uint64_t records_emitted;        /* records the simulated GPU and APIs produced while enabled */
  uint64_t records_written;        /* records written into client buffers */
  uint64_t records_lost_no_buffer; /* records lost because no buffer was given */
  uint64_t records_incomplete_forced; /* unfinished device records delivered by a forced flush (zero end) */
  uint64_t dropped_reported;       /* total returned by cuptiActivityGetNumDroppedRecords */
  uint64_t buffers_requested;
  uint64_t buffers_denied;         /* requests answered with no buffer */
  uint64_t buffers_completed;
  uint64_t buffers_withheld;       /* times a default flush kept a buffer back (an incomplete record) */
  uint64_t flushes;
  uint64_t forced_flushes;
  uint64_t flushes_stalled;        /* flush_stalls served */
  uint32_t enabled_kinds_mask;     /* bit k set = activity kind k enabled now (kinds >= 31 share bit 31) */
  uint32_t runtime_cbids_enabled;  /* runtime callback ids traced now (per-id enables, or all) */
  uint32_t driver_cbids_enabled;   /* driver callback ids traced now */
  int timestamp_callback_set;      /* a client timestamp callback is registered (not CUPTI's default clock) */
  int callbacks_registered;
  int subscribed;                  /* 1 while a cuptiSubscribe handle is held */
  int thread_id_type;              /* CUpti_ActivityThreadIdType in use */
  int buffers_held;                /* client buffers the fake holds now */
  uint64_t pending_device_work;    /* launched device work whose record is not yet delivered */
  uint32_t activity_sessions;      /* times CONCURRENT_KERNEL went from disabled to enabled */
  uint64_t buffers_left_open;      /* times a default flush left a partly filled buffer open (keep_appending) */
  uint64_t buffers_full_by_count;  /* buffers handed over because they held maxNumRecords records */
  int per_thread_buffers;          /* CUPTI_ACTIVITY_ATTR_PER_THREAD_ACTIVITY_BUFFER now */
  uint32_t finalized;              /* cuptiFinalize calls */
  uint64_t buffers_lost_at_finalize; /* client buffers cuptiFinalize forgot (never returned) */
  uint32_t timestamp_registrations; /* cuptiActivityRegisterTimestampCallback calls that succeeded (any client),
                                       since the last reset: each one after the first leaves that many kernel
                                       records at the head of every later activity session on CUPTI's default clock
                                       (CLOCK_REALTIME), as pytorch/pytorch#192021's standalone repro shows */
  uint64_t records_on_wrong_clock;  /* kernel records stamped on CUPTI's default clock after a re-registration */
  uint64_t records_lost;            /* lose_records + drop_records served */
  uint64_t buffers_zeroed_by_cupti; /* buffers the fake zeroed on the requesting thread (ZEROED_OUT_ACTIVITY_BUFFER=0) */
  uint64_t buffers_not_zeroed;      /* ZEROED_OUT_ACTIVITY_BUFFER=1 and the client handed out a buffer not zeroed */
  uint64_t stream_ids_after_destroy; /* cuptiGetStreamIdEx asked about a stream handle after its destruction began */
  uint32_t subscribers;             /* subscriptions held now (gpuutil's, a second client's) */
  int second_client_cpu_only;       /* the keeps_subscription client could not subscribe: it traces no GPU */
  uint64_t flushes_returning_nothing; /* flush=lazy: default flushes that returned no buffer at all */
} fake_cupti_stats;

/* Kinds of simulated device work. */
#define FAKE_CUPTI_KERNEL 0
#define FAKE_CUPTI_MEMCPY 1
#define FAKE_CUPTI_MEMSET 2
/* a peer copy from `device` to device ^ 1: a MEMCPY2 record, only while MEMCPY2 is enabled */
#define FAKE_CUPTI_MEMCPY_PEER 3

typedef struct fake_cupti_work {
  int kind;              /* FAKE_CUPTI_KERNEL / _MEMCPY / _MEMSET */
  const char* name;      /* kernel name (copied) */
  uint32_t device;
  uint32_t stream;
  int64_t start_ns;      /* explicit device times on the session clock; */
  int64_t end_ns;        /*   both 0 = scheduled: see duration_ns */
  int64_t duration_ns;   /* scheduled: starts at max(API start + latency_ns, the stream's previous end) */
  int64_t latency_ns;
  uint32_t grid[3];
  uint32_t block[3];
  uint32_t registers_per_thread;
  uint32_t shared_memory_bytes;
  uint64_t bytes;        /* memcpy / memset */
  uint8_t copy_kind;     /* CUpti_ActivityMemcpyKind */
  uint8_t src_kind;      /* CUpti_ActivityMemoryKind */
  uint8_t dst_kind;
  uint32_t graph_id;     /* nonzero for graph nodes */
} fake_cupti_work;

/* What a synchronizing call waits for. */
#define FAKE_CUPTI_SYNC_NONE 0
#define FAKE_CUPTI_SYNC_DEVICE 1 /* every stream of `sync_device` */
#define FAKE_CUPTI_SYNC_STREAM 2 /* `sync_stream` of `sync_device` */

typedef struct fake_cupti_call {
  int domain;            /* CUPTI_CB_DOMAIN_RUNTIME_API or CUPTI_CB_DOMAIN_DRIVER_API */
  uint32_t cbid;         /* the real callback id (fake_cupti_cbid() looks one up by name) */
  int64_t start_ns;      /* explicit host times on the session clock; both 0 = now .. now + api_ns; a call */
                         /* starting in the future is made then (the fake waits: no record precedes its call) */
  int64_t end_ns;
  int64_t api_ns;
  int captured;          /* made during stream capture: the work is recorded into a graph, nothing runs */
  int sync;              /* FAKE_CUPTI_SYNC_*: the call blocks (in real time) until that work is done */
  uint32_t sync_device;
  uint32_t sync_stream;
  const fake_cupti_work* work;
  int n_work;
  int current_device;    /* the calling thread's current device + 1 (0: the work's device): CUDA 13 lets a launch
                            target a stream of a device that is not current */
} fake_cupti_call;

/* NULL = defaults; clears stats (activity sessions counted from 0 again) and
 * held buffers. The matrix (below) is kept. */
void fake_cupti_reset(const fake_cupti_config* config);

/* The behaviours the CUPTI headers leave open, one setting each. Zero in
 * every field is what the fake did before the matrix existed. */
#define FAKE_CUPTI_BUFFERS_PER_THREAD 0 /* CUDA 13's default: one buffer per application thread */
#define FAKE_CUPTI_BUFFERS_GLOBAL 1     /* PER_THREAD_ACTIVITY_BUFFER=0: every thread writes one shared buffer */
#define FAKE_CUPTI_BUFFERS_SWITCH 2     /* per thread until the first default flush, shared from then on */

/* The Kineto-like second client (fake_cupti_second_client_start/stop). */
/* TEARDOWN_CUPTI=1: cuptiFinalize 20 ms after its stop, on a thread of its own */
#define FAKE_CUPTI_CLIENT_TEARDOWN 1
/* sets PER_THREAD_ACTIVITY_BUFFER=0 at its stop, as Kineto does after each trace */
#define FAKE_CUPTI_CLIENT_PER_THREAD_RESET 2
/* starts and stops from a thread of its own (dynolog on-demand tracing) */
#define FAKE_CUPTI_CLIENT_OTHER_THREAD 4
/* registers a timestamp callback of its own (CUPTI's default + 1000 s) */
#define FAKE_CUPTI_CLIENT_OWN_CLOCK 8
/* subscribes (cuptiSubscribe, no multi-subscriber request) at its first start and keeps the subscription for the
   life of the process, as Kineto did before its lazy subscription; when that fails it traces CPU-only */
#define FAKE_CUPTI_CLIENT_KEEPS_SUBSCRIPTION 16

/* The call the fake's kernel launches go through (fake_cupti_launch_kernel, scenarios). */
#define FAKE_CUPTI_LAUNCH_CHEVRON 0 /* CUDA 13's <<<>>>: __cudaLaunchKernel (_ptsz on the per-thread stream) */
#define FAKE_CUPTI_LAUNCH_RUNTIME 1 /* cudaLaunchKernel */
/* Driver calls inside runtime calls (a runtime launch or copy calls cuLaunchKernel / cuMemcpyAsync inside). */
#define FAKE_CUPTI_NESTED_NONE 0
#define FAKE_CUPTI_NESTED_OUTER_ID 1 /* the device record carries the runtime call's correlation id */
#define FAKE_CUPTI_NESTED_INNER_ID 2 /* ... the driver call's */

typedef struct fake_cupti_matrix {
  int keep_appending;     /* 0: a default flush seals every partly filled buffer (closes it; it is handed over once
                             complete); 1: a buffer holding an incomplete record stays open and records keep being
                             appended to it (only a full or forced-flushed buffer, or one found complete, comes back) */
  int device_records;     /* FAKE_CUPTI_DEVICE_RECORDS_IN_THREAD_BUFFER / _IN_DEVICE_BUFFER (config.device_records
                             wins when set) */
  int buffers;            /* FAKE_CUPTI_BUFFERS_*: where API records (and reserved device records) are written */
  int api_record_at_exit; /* 0: a call's API record is written when the fake is called, before its device records;
                             1: after them, once the call's end time has passed (CUPTI writes it at API exit) */
  int64_t skew_ns;        /* device timestamps this much earlier than host ones (CUPTI's GPU->CPU interpolation):
                             a kernel may start before its launch call ended */
  int hold_empty;         /* 1: every buffer slot also holds one prefetched, empty buffer that no default flush
                             returns (a forced flush does) */
  int second_client;      /* FAKE_CUPTI_CLIENT_* flags */
  int launch_api;         /* FAKE_CUPTI_LAUNCH_*: the call the fake's kernel launches go through */
  int nested_driver;      /* FAKE_CUPTI_NESTED_*: runtime launches and copies call the driver inside */
  int lazy_flush;         /* 1: every other default flush returns no buffer at all (the next one does) */
  int graph_internal_streams; /* 1: graph nodes' records carry internal stream ids (1000 + the launch stream) */
  int multi_subscriber;   /* 1: CUPTI 13.2 (version 130200): several subscribers when all of them ask */
} fake_cupti_matrix;

/* Chooses the matrix cell (kept across fake_cupti_reset); NULL = the cell
 * GPUUTIL_FAKE_CUPTI_MATRIX names, or all defaults. Returns 0. */
int fake_cupti_configure(const fake_cupti_matrix* matrix);
/* The same from the matrix's text ("seal=0,buffers=global"; see
 * fake_cupti_matrix.h): 0, or -1 with the reason on stderr. For ctypes. */
int fake_cupti_configure_text(const char* cell);
fake_cupti_matrix fake_cupti_get_matrix(void);
/* The cells this run covers, ';'-separated in the same spelling: CI's set,
 * or what GPUUTIL_FAKE_CUPTI_CELLS names ("full": all). For ctypes. */
const char* fake_cupti_cells_for_run(void);
fake_cupti_stats fake_cupti_get_stats(void);

/* One runtime or driver API call from the calling thread: its API record (if
 * that callback id is traced) and its device work (if those kinds are
 * enabled). Returns the correlation id (CUPTI numbers every call). */
uint32_t fake_cupti_call_api(const fake_cupti_call* call);
/* The same call failing with `return_value` (a CUDA error code): its API
 * record carries it as returnValue, and it enqueues and waits for nothing. */
uint32_t fake_cupti_call_api_failed(const fake_cupti_call* call, int return_value);
/* The callback id of a runtime ("cudaLaunchKernel", "cudaLaunchKernel_v7000")
 * or driver ("cuLaunchKernel") API by name; sets *domain. 0 if unknown. */
uint32_t fake_cupti_cbid(const char* name, int* domain);
/* Device work with no API call (e.g. a kernel whose launch the trace lacks). */
void fake_cupti_device_work(const fake_cupti_work* work, uint32_t correlation_id);
/* Shorthand: cudaLaunchKernel from the calling thread, a kernel scheduled
 * latency_ns after the call on `stream`, running duration_ns. */
void fake_cupti_launch_kernel(const char* name, uint32_t stream, int64_t duration_ns, int64_t latency_ns);
/* The calling thread's per-thread default stream id (cudaStreamPerThread;
 * NULL in a _ptsz call): work on it is passed to the callback API with that
 * handle, and cuptiGetStreamIdEx resolves the per-thread handle to the
 * calling thread's id. Other ids have an opaque handle each; 7 is the legacy
 * default stream (NULL). */
uint32_t fake_cupti_per_thread_stream(void);
/* Blocks (real time) until every launched device work item has finished. */
void fake_cupti_device_synchronize(void);
/* Now on the clock the fake uses (the registered timestamp callback). */
int64_t fake_cupti_now_ns(void);

/* Another CUPTI client, as Kineto does it under torch.profiler. */
typedef struct fake_cupti_client_stats {
  uint64_t kernels;      /* kernel records it received */
  uint64_t memcpys;
  uint64_t api_records;
  uint64_t buffers;      /* its own buffers delivered back to it */
  uint64_t foreign_buffers_rejected; /* buffers it did not allocate ("unknown buffer") */
  int64_t last_record_end_ns; /* latest kernel end it received (which clock its records are on) */
} fake_cupti_client_stats;
/* Registers the second client's buffer callbacks and enables kernels, copies,
 * memsets, runtime and driver APIs (prepareTrace/startTrace). The matrix's
 * second_client flags say what else it does. */
void fake_cupti_second_client_start(void);
/* Disables those kinds and force-flushes (stopTrace); returns what it got. */
fake_cupti_client_stats fake_cupti_second_client_stop(void);
/* Another tool holding the CUPTI subscription (NULL releases it). */
void fake_cupti_other_subscriber(const char* name);
/* The first subscriber's callback (a CUpti_CallbackFunc) and its user data, so a benchmark can time the
   subscriber's own cost without the fake's dispatch. Returns 0 when nobody subscribed. */
int fake_cupti_subscriber_callback(void** callback, void** user);
/* Injects `n` more of a fault mid-run, without a reset: "lose_records", "drop_records", "no_timing_records",
   "zero_timestamps" (the config fields of those names). Returns 0, or -1 for an unknown name. */
int fake_cupti_inject(const char* fault, int n);
/* The callback id the fake's kernel launches use in this cell, and its domain. */
uint32_t fake_cupti_launch_cbid(int per_thread_stream);
/* Destroys stream `id` of `device` (CUPTI_CBID_RESOURCE_STREAM_DESTROY_STARTING to subscribers first); its handle
   is recycled for the next stream created. */
void fake_cupti_destroy_stream(uint32_t device, uint32_t id);
/* The handle of stream `id` of `device` (created now, with CUPTI_CBID_RESOURCE_STREAM_CREATED, if new). */
void* fake_cupti_stream_handle(uint32_t device, uint32_t id);

/* A step scenario on the fake's own thread (its host calls are made from that
 * thread). `hook` receives the scenario's host-side events on that thread:
 * type 0 = step begin, 1 = step end, 2 = host range [start, end). */
typedef void (*fake_cupti_host_hook)(void* ctx, int type, int64_t step, const char* name, int64_t start_ns,
                                     int64_t end_ns);

typedef struct fake_cupti_scenario {
  int steps;
  int64_t dataloader_ns;      /* "enumerate(DataLoader)#..." range at each step's start */
  int kernels_per_step;
  int64_t kernel_ns;
  int64_t launch_api_ns;      /* duration of each cudaLaunchKernel on the host */
  int64_t launch_latency_ns;  /* API start -> kernel start on an idle stream */
  int streams;                /* compute kernels round-robin over streams 7.. */
  int nccl_kernels_per_step;  /* on stream 20 */
  int64_t nccl_ns;
  int memcpy_per_step;        /* HtoD, before the kernels */
  int64_t memcpy_ns;
  uint64_t memcpy_bytes;
  int sync_at_step_end;       /* cudaStreamSynchronize of the last stream at the end of the step */
  int pace_realtime;          /* the host thread runs in real time (sleeps to its simulated times) */
  /* streaming mode (steps == 0): kernels at a sustained rate */
  uint64_t stream_records;
  double records_per_s;
  fake_cupti_host_hook hook;
  void* hook_ctx;
} fake_cupti_scenario;

/* Starts a scenario on the fake's thread; returns 0, or -1 if one runs. */
int fake_cupti_run_scenario(const fake_cupti_scenario* scenario);
void fake_cupti_wait(void); /* joins the scenario thread and a pending second-client teardown */

#ifdef __cplusplus
}
#endif

#endif

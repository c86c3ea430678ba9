/* Control API of the fake CUPTI (test-only shared library libfake_cupti.so).
 *
 * The library exports the CUPTI entry points gpuutil's collector calls
 * (cuptiGetVersion, cuptiActivityEnable, cuptiActivityRegisterCallbacks, ...)
 * with CUPTI's real signatures, and behaves as a simulated GPU: it writes
 * genuine CUPTI record structs (CUpti_ActivityKernel10, CUpti_ActivityAPI,
 * CUpti_ActivityMemcpy6, ...) into the buffers the client hands out, from its
 * own thread (scenarios) or from the calling thread (live launches), asks for
 * buffers and completes them through the registered callbacks, and injects
 * faults on request. Tests load it through GPUUTIL_CUPTI_LIBRARY, the same
 * run-time path the product uses for the real libcupti, and drive it through
 * this C API (dlsym'd by the tests).
 *
 * Buffer layout is the fake's own (a real client only walks buffers with
 * cuptiActivityGetNextRecord): each record is an 8-byte header {size, magic}
 * followed by the record struct, padded to 8 bytes.
 */
#ifndef GPUUTIL_FAKE_CUPTI_H
#define GPUUTIL_FAKE_CUPTI_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct fake_cupti_config {
  uint32_t version;      /* cuptiGetVersion; 0 = the compiled CUPTI_API_VERSION */
  int enable_error;      /* CUptiResult for cuptiActivityEnable; 0 = CUPTI_SUCCESS */
  int enable_error_kind; /* fail only this kind (0 = any kind) */
  int emit_threads;      /* per-thread buffers in use at once (CUDA 13 style); 0 = 1 */
  /* faults: how many to inject (each once, at the next opportunity) */
  int null_buffers;      /* complete a NULL buffer */
  int overlong_buffers;  /* complete with validSize > size */
  int truncated_buffers; /* complete with the last record cut in half */
  int zero_timestamps;   /* kernel records with start = 0 */
  int unknown_kinds;     /* records of a kind no client decodes */
  int out_of_order;      /* complete held buffers newest first */
  uint64_t dropped_records; /* reported by cuptiActivityGetNumDroppedRecords */
} fake_cupti_config;

typedef struct fake_cupti_stats {
  uint64_t records_emitted;     /* records the simulated GPU produced while enabled */
  uint64_t records_written;     /* records written into client buffers */
  uint64_t records_lost_no_buffer; /* records lost because no buffer was given */
  uint64_t dropped_reported;    /* total returned by cuptiActivityGetNumDroppedRecords */
  uint64_t buffers_requested;
  uint64_t buffers_denied;      /* requests answered with no buffer */
  uint64_t buffers_completed;
  uint64_t flushes;
  uint32_t enabled_kinds_mask;  /* bit k set = activity kind k enabled now */
  int timestamp_callback_set;
  int callbacks_registered;
  int buffers_held;             /* client buffers the fake holds now */
} fake_cupti_stats;

/* Host-side events of a scenario, delivered in time order from the fake's
 * thread: type 0 = step begin, 1 = step end, 2 = host range [start, end). */
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
  int sync_at_step_end;       /* cudaStreamSynchronize + SYNCHRONIZATION record */
  int pace_realtime;          /* emit records when their end time has passed */
  /* streaming mode (steps == 0): kernels at a sustained rate */
  uint64_t stream_records;
  double records_per_s;
  fake_cupti_host_hook hook;
  void* hook_ctx;
} fake_cupti_scenario;

void fake_cupti_reset(const fake_cupti_config* config); /* NULL = defaults; clears stats */
fake_cupti_stats fake_cupti_get_stats(void);
/* Starts a scenario on the fake's thread; returns 0, or -1 if one runs. */
int fake_cupti_run_scenario(const fake_cupti_scenario* scenario);
void fake_cupti_wait(void); /* joins the scenario thread */
/* A live launch from the calling thread: a cudaLaunchKernel API record and
 * a kernel record (start = now + latency_ns) written at once. */
void fake_cupti_launch_kernel(const char* name, uint32_t stream, int64_t duration_ns, int64_t latency_ns);
/* Now on the clock the fake uses (the registered timestamp callback). */
int64_t fake_cupti_now_ns(void);

#ifdef __cplusplus
}
#endif

#endif

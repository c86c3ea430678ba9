// The one thread identity every live source uses.
//
// CUPTI's API records carry CUpti_ActivityAPI::threadId, which on Linux is
// the low 32 bits of pthread_self() (CUPTI_ACTIVITY_THREAD_ID_TYPE_DEFAULT;
// Kineto keys threads by it for the same reason). A host range from NVTX, the
// RecordFunction hook or Python must carry the same key, or a DataLoader wait
// and the launches on that thread land on two different session threads and
// the wait is never attributed. So every source keys its thread by
// this_thread_key(); the OS thread id (gettid, threading.get_native_id())
// is kept beside it to name the thread in reports and as the key's
// generation: glibc gives the pthread_t of a thread that exited to the next
// one, so the same key with another OS tid is another thread
// (EventSink::thread_index). Python computes the same key as
// threading.get_ident() & 0xffffffff.
#pragma once

#include <pthread.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdint>

namespace gpuutil {

inline uint32_t this_thread_key() { return static_cast<uint32_t>(pthread_self()); }

inline int64_t this_os_tid() { return static_cast<int64_t>(::syscall(SYS_gettid)); }

}  // namespace gpuutil

// The static entry points CUPTI calls on behalf of the CuptiCollector, and
// the process-wide state they share (internal to collectors/cupti: the
// collector's three files include it, nothing else does).
//
// CUPTI's callbacks carry no user pointer, so the active collector sits in
// one process-wide slot (active()); in_flight() counts callbacks running
// now, so stop() can wait them out. The entry points are defined in
// cupti_delivery.cpp (buffers, API and resource callbacks); they run on
// the application's threads and CUPTI's: no allocation, no lock shared
// with the drain thread, no vendor call but the documented queries.
#pragma once

#include <cupti.h>

#include <atomic>
#include <cstdint>
#include <string>

namespace gpuutil::cupti {

class CuptiCollector;

std::atomic<CuptiCollector*>& active_collector();
std::atomic<int>& callbacks_in_flight();

// Why a CUPTI error means "no GPU collection", in one line, with the fix.
std::string explain_cupti_error(CUptiResult r);
// gpuutil's cuptiActivityRegisterTimestampCallback calls in this process.
uint64_t timestamp_registrations();
// "1.234 s" (session clock) for diagnostics.
std::string seconds(int64_t ns);

struct CallbackAccess {
  static void CUPTIAPI api(void* user, CUpti_CallbackDomain domain, CUpti_CallbackId cbid, const void* data);
  static void CUPTIAPI requested(uint8_t** buffer, size_t* size, size_t* max_records);
  static void CUPTIAPI completed(CUcontext ctx, uint32_t stream, uint8_t* buffer, size_t size, size_t valid);
};

}  // namespace gpuutil::cupti

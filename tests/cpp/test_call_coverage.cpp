// Every CUPTI runtime and driver callback id of the headers this build used
// (cupti_runtime_cbid.h, cupti_driver_cbid.h, through the tables CMake
// generates from them) is classified, and an id whose name or parameter
// struct says it submits or waits for device work is never left "other"
// (issue 36, item 1: CUDA 13's `<<<>>>` launch, __cudaLaunchKernel, was
// neither traced nor waited for, because the classifier knew only names
// starting "cuda"/"cu"/"hip").
//
// What says "device work", independently of the classifier:
//  - the call's parameter struct (generated_cuda_runtime_api_meta.h /
//    generated_cuda_meta.h, compiled into the product's call table) carries
//    a stream or a launch config: it enqueues on, or waits for, a stream;
//  - or its name has a token that only device work has (Launch, Memcpy,
//    Memset, Synchronize, Wait, Signal, Record, Prefetch, Discard, Capture,
//    or the Async suffix).
// A few such ids do no device work (queries and settings of a stream, graph
// construction, interop and module setup): each is excused below with the
// reason, so a new id in a later header fails until someone decides.
// Families the collector depends on are pinned exactly: a kernel launch
// must be a launch, a graph launch a graph launch, a copy a copy, a memset
// a memset, a host wait a sync; and taking any one launch id out of the
// classification must fail the check.
#include <gtest/gtest.h>

#include <functional>
#include <map>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "collectors/cupti/call_catalog.h"
#include "cupti_id_tables.h"
#include "gpuutil/range_classify.h"

namespace gpuutil {
namespace {

using cupti_ids::Entry;
using cupti_ids::kDriver;
using cupti_ids::kRuntime;

struct Id {
  bool driver;
  uint32_t cbid;
  std::string name;
};

std::vector<Id> all_ids() {
  std::vector<Id> out;
  for (const Entry& e : kRuntime) out.push_back({false, e.id, e.name});
  for (const Entry& e : kDriver) out.push_back({true, e.id, e.name});
  return out;
}

bool has(std::string_view s, std::string_view token) { return s.find(token) != std::string_view::npos; }

// The name without its family prefix and suffixes, case kept.
std::string_view stem(std::string_view name) {
  name = strip_api_suffixes(name);
  for (std::string_view p : {"__cuda", "cuda", "cu64", "cu"}) {
    if (name.substr(0, p.size()) == p) return name.substr(p.size());
  }
  return name;
}

// Independently of classify_call: does the name or the parameter struct
// say the call submits or waits for device work?
bool says_device_work(const std::string& name) {
  if (cupti::call_params(name).has_stream()) return true;
  const std::string_view s = stem(name);
  for (std::string_view t : {"Launch", "Memcpy", "Memset", "Synchronize", "Wait", "Signal", "Record", "Prefetch",
                             "Discard", "Capture"}) {
    if (has(s, t)) return true;
  }
  return s.size() > 5 && s.substr(s.size() - 5) == "Async";
}

// Ids that say device work by name or parameters but do none, and why.
const std::map<std::string_view, std::string_view>& excused() {
  static const std::map<std::string_view, std::string_view> m = [] {
    std::map<std::string_view, std::string_view> e;
    const char* stream_queries =
        "reads or sets a property of the stream, or asks about its capture: enqueues nothing, waits for nothing";
    for (const char* n : {"StreamQuery", "StreamGetPriority", "StreamGetFlags", "StreamGetAttribute",
                          "StreamSetAttribute", "StreamCopyAttributes", "StreamGetId", "StreamGetDevice", "StreamGetCtx",
                          "StreamGetGreenCtx", "StreamIsCapturing", "StreamGetCaptureInfo",
                          "StreamUpdateCaptureDependencies", "ThreadExchangeStreamCaptureMode"}) {
      e[n] = stream_queries;
    }
    for (const char* n : {"OccupancyMaxPotentialClusterSize", "OccupancyMaxActiveClusters"}) {
      e[n] = "computes occupancy for a launch configuration (whose stream it carries): launches nothing";
    }
    for (const char* n : {"GLMapBufferObjectAsync", "GLUnmapBufferObjectAsync"}) {
      e[n] = "deprecated OpenGL interop mapping (no kernel, copy or memset record)";
    }
    return e;
  }();
  return m;
}

std::string excuse_for(const std::string& name) {
  const auto it = excused().find(stem(name));
  return it == excused().end() ? "" : std::string(it->second);
}

using Classifier = std::function<ApiCategory(const Id&)>;

// The ids the classification leaves "other" although their name or
// parameters say they do device work, and the ids of a pinned family
// classified as something else (name: what was expected).
std::vector<std::string> uncovered(const Classifier& classify) {
  std::vector<std::string> out;
  for (const Id& id : all_ids()) {
    const ApiCategory got = classify(id);
    const std::string_view s = stem(id.name);
    // Families pinned exactly (the collector waits for their records, or
    // learns syncs from them).
    ApiCategory want = ApiCategory::kOther;
    const bool graph_api = s.substr(0, 5) == "Graph" && s.substr(0, 8) != "Graphics";
    if (s == "GraphLaunch") {
      want = ApiCategory::kGraphLaunch;
    } else if (s == "GraphUpload") {
      want = ApiCategory::kStreamWork;  // uploads a graph, ordered on a stream; runs none of it
    } else if (graph_api) {
      want = ApiCategory::kOther;  // building or editing a graph runs nothing
    } else if (has(s, "LaunchHostFunc")) {
      want = ApiCategory::kHostFunc;
    } else if ((has(s, "Launch") && has(s, "Kernel")) || s == "Launch" || s == "LaunchGrid" || s == "LaunchGridAsync") {
      want = ApiCategory::kLaunch;
    } else if (has(s, "Memcpy")) {
      want = ApiCategory::kCopy;
    } else if (has(s, "Memset")) {
      want = ApiCategory::kMemset;
    } else if (s.size() >= 11 && s.substr(s.size() - 11) == "Synchronize") {
      want = ApiCategory::kSync;
    }
    const bool pinned = want != ApiCategory::kOther || graph_api;
    if (pinned && got != want) {
      out.push_back(id.name + ": " + to_string(got) + ", expected " + to_string(want));
      continue;
    }
    if (!pinned && got == ApiCategory::kOther && says_device_work(id.name) && excuse_for(id.name).empty()) {
      out.push_back(id.name + ": other, but its " +
                    (cupti::call_params(id.name).has_stream() ? std::string("parameters carry a stream")
                                                              : std::string("name says device work")));
    }
  }
  return out;
}

ApiCategory product(const Id& id) { return classify_call(id.name); }

std::string joined(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& x : v) s += "\n  " + x;
  return s;
}

TEST(CallCoverage, TheHeadersOfThisBuildHaveTheIdsOfEveryLaunchFamily) {
  std::set<std::string> names;
  for (const Id& id : all_ids()) names.insert(id.name);
  EXPECT_GT(names.size(), 1000u) << "runtime and driver tables generated from the CUPTI headers";
  // CUDA 13's <<<>>> (crt/host_runtime.h -> __cudaLaunchKernel_helper).
  EXPECT_TRUE(names.count("__cudaLaunchKernel_v13000") && names.count("__cudaLaunchKernel_ptsz_v13000"));
  for (const char* n : {"cudaLaunchKernel_v7000", "cudaLaunchKernelExC_v11060", "cudaLaunchCooperativeKernel_v9000",
                        "cuLaunchKernel", "cuLaunchKernelEx", "cudaGraphLaunch_v10000", "cuGraphLaunch"}) {
    EXPECT_TRUE(names.count(n)) << n;
  }
}

TEST(CallCoverage, EveryIdThatSaysItSubmitsOrWaitsForDeviceWorkIsClassified) {
  const std::vector<std::string> missing = uncovered(&product);
  EXPECT_TRUE(missing.empty()) << missing.size() << " ids:" << joined(missing);
}

// Each excuse names ids that exist and need it (the list cannot rot into
// excusing nothing, or something the classifier now covers).
TEST(CallCoverage, EveryExcuseIsForAnIdThatSaysDeviceWorkAndDoesNone) {
  for (const auto& [excused_stem, why] : excused()) {
    int used = 0;
    for (const Id& id : all_ids()) {
      if (stem(id.name) != excused_stem) continue;
      EXPECT_EQ(classify_call(id.name), ApiCategory::kOther) << id.name << " is classified: drop its excuse";
      used += says_device_work(id.name) ? 1 : 0;
    }
    EXPECT_GT(used, 0) << excused_stem << " (" << why << ") excuses no id of these headers";
  }
}

TEST(CallCoverage, TakingAnyOneLaunchIdOutOfTheClassificationFailsTheCheck) {
  int launches = 0;
  for (const Id& target : all_ids()) {
    const ApiCategory c = classify_call(target.name);
    if (c != ApiCategory::kLaunch && c != ApiCategory::kGraphLaunch) continue;
    ++launches;
    const Classifier without = [&](const Id& id) {
      return id.driver == target.driver && id.cbid == target.cbid ? ApiCategory::kOther : classify_call(id.name);
    };
    const std::vector<std::string> missing = uncovered(without);
    ASSERT_EQ(missing.size(), 1u) << target.name << joined(missing);
    EXPECT_EQ(missing[0].rfind(target.name + ":", 0), 0u) << missing[0];
  }
  // cudaLaunch, cudaLaunchKernel, _ptsz, ExC, cooperative (+multi-device),
  // __cudaLaunchKernel(_ptsz), cudaGraphLaunch(_ptsz), cuLaunch, cuLaunchGrid,
  // cuLaunchGridAsync, cuLaunchKernel(_ptsz), cuLaunchKernelEx(_ptsz),
  // cuLaunchCooperativeKernel(+multi), cuGraphLaunch(_ptsz).
  EXPECT_GE(launches, 20);
}

// What the collector does with a CUDA 13 <<<>>> launch: traced, waited for
// (it enqueues a kernel), its call's stream unread (13.0's headers have no
// parameter struct for it: its record names the stream).
TEST(CallCoverage, ACuda13TripleChevronLaunchIsTracedAndWaitedFor) {
  for (const char* n : {"__cudaLaunchKernel_v13000", "__cudaLaunchKernel_ptsz_v13000"}) {
    const ApiRole role = api_role(n);
    EXPECT_EQ(role.category, ApiCategory::kLaunch) << n;
    EXPECT_TRUE(role.traced) << n;
    EXPECT_TRUE(role.expects_record) << n;
    const uint16_t f = cupti::CallRoles::flags_of(n, cupti::call_params(n));
    EXPECT_TRUE(f & cupti::kCallEnqueue) << n;
    EXPECT_TRUE(f & cupti::kCallApiRecord) << n;
    EXPECT_FALSE(cupti::call_params(n).has_stream()) << n << ": no struct in the 13.0 headers";
  }
  EXPECT_EQ(classify_api("__cudaLaunchKernel").kind, HostApiKind::kLaunch) << "offline traces name it so too";
  // The other __cuda* entry points register modules and configure calls: no device work.
  for (const char* n : {"__cudaRegisterFunction_v13000", "__cudaPushCallConfiguration_v13000", "__cudaGetKernel_v13000"}) {
    EXPECT_EQ(classify_call(n), ApiCategory::kOther) << n;
  }
}

// The parameter table comes from the headers: a struct the collector reads a
// stream from is where the header puts it.
TEST(CallCoverage, TheParameterTableReadsStreamsWhereTheHeadersPutThem) {
  size_t n = 0;
  const cupti::NamedCallParams* table = cupti::call_params_table(&n);
  EXPECT_GT(n, 300u);
  EXPECT_EQ(cupti::call_params("cudaLaunchKernel_v7000").stream, int16_t(offsetof(cudaLaunchKernel_v7000_params, stream)));
  EXPECT_EQ(cupti::call_params("cuLaunchKernel").stream, int16_t(offsetof(cuLaunchKernel_params, hStream)));
  EXPECT_EQ(cupti::call_params("cuLaunchKernelEx").config, int16_t(offsetof(cuLaunchKernelEx_params, config)));
  EXPECT_EQ(cupti::call_params("cuLaunchKernelEx").config_stream, int16_t(offsetof(CUlaunchConfig, hStream)));
  EXPECT_EQ(cupti::call_params("cudaMemcpyAsync_ptsz_v7000").count, int16_t(offsetof(cudaMemcpyAsync_ptsz_v7000_params, count)));
  EXPECT_EQ(cupti::call_params("cuMemsetD32Async").count, int16_t(offsetof(cuMemsetD32Async_params, N)));
  EXPECT_EQ(cupti::call_params("cudaEventRecord_v3020").event, int16_t(offsetof(cudaEventRecord_v3020_params, event)));
  EXPECT_EQ(cupti::call_params("cudaStreamBeginCapture_v10000").stream,
            int16_t(offsetof(cudaStreamBeginCapture_v10000_params, stream)));
  int launches_with_stream = 0;
  for (size_t i = 0; i < n; ++i) {
    if (classify_call(table[i].name) == ApiCategory::kLaunch && table[i].params.has_stream()) ++launches_with_stream;
  }
  EXPECT_GE(launches_with_stream, 8) << "cudaLaunchKernel(_ptsz), ExC(_ptsz), cooperative(_ptsz), cuLaunchKernel(Ex)(_ptsz)";
}

}  // namespace
}  // namespace gpuutil

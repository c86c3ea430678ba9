// Pieces of the JSON report shared between the report writer
// (report_json.cpp) and the cluster writer (cluster_json.cpp): one finding,
// and the summary.ranks / summary.cluster members of a cross-rank view.
// Internal to the exporters.
#pragma once

#include "export/json_writer.h"
#include "gpuutil/cluster.h"
#include "gpuutil/report.h"

namespace gpuutil {

void finding_json(JsonWriter& w, const Finding& f);
// Writes the "ranks" and "cluster" members into the object being written.
void cluster_members(JsonWriter& w, const ClusterView& view);

}  // namespace gpuutil

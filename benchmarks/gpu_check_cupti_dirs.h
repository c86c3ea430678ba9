// Where the GPU check's C++ programs (gpu_check_driver, gpu_check_probe) look
// for libcupti when gpu_check.py did not name the one its Python side loaded
// (--cupti-library): the toolkit's extras/CUPTI/lib64 and the nvidia-* wheel
// folders (nvidia/cu13/lib for CUDA 13, nvidia/cuda_cupti/lib for 12) of
// every Python on PATH, on PYTHONPATH and in $VIRTUAL_ENV. The collector's
// own search (collectors/cupti/cupti_api.cpp) covers lib64 only; this list is
// handed to it as ProfilerOptions::cupti_library_dirs by the driver, and
// walked directly by the probe. Header-only; no vendor API.
#pragma once

#include <glob.h>
#include <unistd.h>

#include <cstdlib>
#include <string>
#include <vector>

namespace gpu_check {

// Absolute folders, most specific first, each listed once.
inline std::vector<std::string> cupti_candidate_dirs() {
  std::vector<std::string> out;
  auto add = [&out](const std::string& d) {
    if (d.empty() || d[0] != '/') return;  // never relative: it would resolve against the cwd
    for (const auto& o : out) {
      if (o == d) return;
    }
    if (access(d.c_str(), R_OK) == 0) out.push_back(d);
  };
  auto add_glob = [&add](const std::string& pattern) {
    glob_t g{};
    if (glob(pattern.c_str(), 0, nullptr, &g) == 0) {
      for (size_t i = 0; i < g.gl_pathc; ++i) add(g.gl_pathv[i]);
    }
    globfree(&g);
  };
  auto site_packages = [&add](const std::string& site) {
    add(site + "/nvidia/cu13/lib");
    add(site + "/nvidia/cuda_cupti/lib");
  };
  auto split = [](const char* v) {
    std::vector<std::string> parts;
    std::string cur;
    for (const char* p = v ? v : ""; *p; ++p) {
      if (*p == ':') {
        parts.push_back(cur);
        cur.clear();
      } else {
        cur += *p;
      }
    }
    if (!cur.empty()) parts.push_back(cur);
    return parts;
  };
  for (const std::string& entry : split(std::getenv("PYTHONPATH"))) site_packages(entry);
  if (const char* venv = std::getenv("VIRTUAL_ENV"); venv && *venv) {
    add_glob(std::string(venv) + "/lib/python3*/site-packages/nvidia/cu13/lib");
    add_glob(std::string(venv) + "/lib/python3*/site-packages/nvidia/cuda_cupti/lib");
  }
  // A Python on PATH lives in <prefix>/bin: its wheels are under <prefix>/lib.
  for (const std::string& bin : split(std::getenv("PATH"))) {
    if (bin.size() < 4 || bin.compare(bin.size() - 4, 4, "/bin") != 0) continue;
    if (access((bin + "/python3").c_str(), X_OK) != 0) continue;
    const std::string prefix = bin.substr(0, bin.size() - 4);
    add_glob(prefix + "/lib/python3*/site-packages/nvidia/cu13/lib");
    add_glob(prefix + "/lib/python3*/site-packages/nvidia/cuda_cupti/lib");
    add_glob(prefix + "/lib/python3*/dist-packages/nvidia/cu13/lib");
  }
  if (const char* home = std::getenv("CUDA_HOME"); home && *home) add(std::string(home) + "/extras/CUPTI/lib64");
  add("/usr/local/cuda/extras/CUPTI/lib64");
  return out;
}

}  // namespace gpu_check

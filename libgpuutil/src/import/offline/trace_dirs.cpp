// A directory of traces as the traces in it (see gpuutil/trace_dirs.h).
#include "gpuutil/trace_dirs.h"

#include <dirent.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <map>
#include <string_view>

namespace gpuutil {

namespace {

bool ends_with(std::string_view s, std::string_view tail) {
  return s.size() >= tail.size() && s.substr(s.size() - tail.size()) == tail;
}

bool is_directory(const std::string& path) {
  struct stat st {};
  return path != "-" && ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

// tensorboard_trace_handler's `<worker>.<digits>.pt.trace.json[.gz]`: the
// worker, or "" for another name.
std::string handler_worker(std::string_view name) {
  const std::string_view tail = ends_with(name, ".pt.trace.json.gz") ? ".pt.trace.json.gz" : ".pt.trace.json";
  if (!ends_with(name, tail)) return "";
  name.remove_suffix(tail.size());
  const size_t dot = name.rfind('.');
  if (dot == std::string_view::npos || dot + 1 == name.size()) return "";
  for (char c : name.substr(dot + 1)) {
    if (c < '0' || c > '9') return "";
  }
  return std::string(name.substr(0, dot));
}

bool expand_one(const std::string& dir, std::vector<std::string>* out, std::string* error) {
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) {
    *error = "cannot read " + dir + ": " + std::strerror(errno);
    return false;
  }
  std::vector<std::string> names;
  while (const dirent* e = ::readdir(d)) {
    const std::string name = e->d_name;
    if (name.empty() || name[0] == '.' || !(ends_with(name, ".json") || ends_with(name, ".json.gz"))) continue;
    struct stat st {};
    const std::string path = dir + (ends_with(dir, "/") ? "" : "/") + name;
    if (::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode)) names.push_back(name);
  }
  ::closedir(d);
  if (names.empty()) {
    *error = "cannot read " + dir + ": the directory holds no trace files (*.json, *.json.gz)";
    return false;
  }
  std::sort(names.begin(), names.end());
  std::map<std::string, std::vector<std::string>> by_worker;
  for (const auto& n : names) {
    const std::string w = handler_worker(n);
    if (!w.empty()) by_worker[w].push_back(n);
  }
  for (const auto& [worker, files] : by_worker) {
    if (files.size() > 1) {
      *error = "cannot read " + dir + ": it holds " + std::to_string(files.size()) + " traces of worker " + worker +
               " (one per profiling cycle, not one per rank): name the one to analyse, e.g. " + dir +
               (ends_with(dir, "/") ? "" : "/") + files.back();
      return false;
    }
  }
  for (const auto& n : names) out->push_back(dir + (ends_with(dir, "/") ? "" : "/") + n);
  return true;
}

}  // namespace

TraceDirsResult expand_trace_dirs(const std::vector<std::string>& paths) {
  TraceDirsResult r;
  for (const auto& p : paths) {
    if (!is_directory(p)) {
      r.paths.push_back(p);
    } else if (!expand_one(p, &r.paths, &r.error)) {
      r.paths.clear();
      return r;
    }
  }
  r.ok = true;
  return r;
}

}  // namespace gpuutil

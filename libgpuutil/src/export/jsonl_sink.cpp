// JSON Lines file sink (see jsonl_sink.h).
#include "export/jsonl_sink.h"

#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace gpuutil {

JsonlSink::JsonlSink(const std::string& path) {
  file_ = std::fopen(path.c_str(), "w");
  if (!file_) error_ = "cannot open " + path + ": " + std::strerror(errno);
}

void JsonlSink::abandon() {
  if (file_) close(fileno(file_));  // the FILE itself is leaked: fclose could flush a half line
  file_ = nullptr;
}

JsonlSink::~JsonlSink() {
  if (file_) std::fclose(file_);
}

bool JsonlSink::write_line(std::string_view line) {
  if (!file_) return false;
  const bool ok = std::fwrite(line.data(), 1, line.size(), file_) == line.size() && std::fputc('\n', file_) != EOF &&
                  std::fflush(file_) == 0;
  return ok;
}

}  // namespace gpuutil

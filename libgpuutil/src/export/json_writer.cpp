// The slow paths of JsonWriter (json_writer.h), kept out of line so the
// header does not pull in nlohmann: finite doubles through nlohmann's own
// number formatter, and strings that need escaping through nlohmann's
// escaper. Both are what nlohmann::json::dump(-1, ' ', false,
// error_handler_t::replace) does, so the bytes match it exactly.
#include "export/json_writer.h"

#include <string>

#include <nlohmann/json.hpp>

namespace gpuutil {

void JsonWriter::append_double(double v) {
  // The formatter nlohmann's serializer calls for IEEE doubles (Grisu2),
  // given the same 64 bytes as the serializer's number buffer.
  constexpr size_t kBuffer = 64;
  char* p = room(kBuffer);
  const char* end = nlohmann::detail::to_chars(p, p + kBuffer, v);
  pos_ += static_cast<size_t>(end - p);
}

void JsonWriter::append_escaped(std::string_view s) {
  // Rare (control characters, non-ASCII names): a temporary json string.
  const std::string text =
      nlohmann::json(std::string(s)).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  put(text.data(), text.size());
}

}  // namespace gpuutil

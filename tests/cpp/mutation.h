// Random mutations of a JSON document for the importer's fuzz tests
// (test_import_robustness.cpp, test_import_parallel.cpp): truncation, byte
// flips, deleted and duplicated spans, numbers and strings swapped,
// structural characters inserted. Deterministic for a given PRNG state.
#pragma once

#include <cstddef>
#include <random>
#include <string>

namespace gpuutil::test {

// Applies one random mutation to `doc`.
inline void mutate(std::string* doc, std::mt19937_64& rng) {
  auto pick = [&rng](size_t n) { return n == 0 ? size_t{0} : static_cast<size_t>(rng() % n); };
  std::string& d = *doc;
  switch (rng() % 7) {
    case 0:  // truncate
      d.resize(pick(d.size() + 1));
      break;
    case 1: {  // flip a few bytes
      const size_t flips = 1 + pick(4);
      for (size_t i = 0; i < flips && !d.empty(); ++i) d[pick(d.size())] = static_cast<char>(rng() & 0xFF);
      break;
    }
    case 2: {  // delete a span
      const size_t at = pick(d.size() + 1);
      d.erase(at, 1 + pick(64));
      break;
    }
    case 3: {  // duplicate a span
      if (d.empty()) break;
      const size_t at = pick(d.size());
      const std::string span = d.substr(at, 1 + pick(128));
      d.insert(pick(d.size() + 1), span);
      break;
    }
    case 4: {  // number -> string: quote the next number token
      size_t at = pick(d.size());
      while (at < d.size() && !(d[at] == '-' || (d[at] >= '0' && d[at] <= '9'))) ++at;
      if (at >= d.size()) break;
      size_t end = at;
      while (end < d.size() && d[end] != ',' && d[end] != '}' && d[end] != ']' && d[end] != ' ') ++end;
      d.insert(end, "\"");
      d.insert(at, "\"");
      break;
    }
    case 5: {  // string -> number: replace the next string token
      size_t at = d.find('"', pick(d.size()));
      if (at == std::string::npos) break;
      const size_t end = d.find('"', at + 1);
      if (end == std::string::npos) break;
      static const char* kNumbers[] = {"0", "-1", "1e400", "-0.0005", "18446744073709551616", "1.5", "9e18"};
      d.replace(at, end - at + 1, kNumbers[pick(7)]);
      break;
    }
    default: {  // insert a structural character
      static const char kChars[] = "{}[],:\"\\";
      d.insert(pick(d.size() + 1), 1, kChars[pick(sizeof(kChars) - 1)]);
      break;
    }
  }
}

}  // namespace gpuutil::test

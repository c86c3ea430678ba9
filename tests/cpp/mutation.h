// Random mutations of a JSON document for the importer's fuzz tests
// (test_import_robustness.cpp, test_import_parallel.cpp,
// test_import_stream.cpp): truncation, byte flips, deleted and duplicated
// spans, numbers and strings swapped, structural characters inserted.
// Deterministic for a given PRNG state. differential_fuzz() drives a
// pass-against-serial comparison with them.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <random>
#include <string>
#include <utility>
#include <vector>

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

// The differential fuzz loop of the import-pass tests: for up to `seconds`
// (at most 200,000 inputs), a seed (in turn) with 1-3 mutations goes to
// `compare(doc, i, &taken)`, which imports it by the pass under test and
// serially and returns their difference ("" when identical), setting
// `taken` when the pass under test produced the result itself. The first
// difference fails the test. Returns {inputs tried, inputs taken}.
template <typename Compare>
std::pair<size_t, size_t> differential_fuzz(const std::vector<std::string>& seeds, uint64_t rng_seed,
                                            double seconds, Compare compare) {
  const auto start = std::chrono::steady_clock::now();
  std::mt19937_64 rng(rng_seed);
  size_t i = 0;
  size_t taken = 0;
  for (; i < 200000; ++i) {
    if ((i & 63) == 0 && std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() > seconds) {
      break;
    }
    std::string doc = seeds[i % seeds.size()];
    const size_t mutations = 1 + rng() % 3;
    for (size_t m = 0; m < mutations; ++m) mutate(&doc, rng);
    bool took = false;
    const std::string diff = compare(doc, i, &took);
    if (!diff.empty()) {
      ADD_FAILURE() << "iteration " << i << ": " << diff;
      break;
    }
    taken += took;
  }
  return {i, taken};
}

}  // namespace gpuutil::test

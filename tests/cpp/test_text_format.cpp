// Human-readable numbers in findings (analysis/text_format.h): ms_text and
// pct_text print exactly what printf's "%.1f" into 32 bytes printed, for
// every value.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <limits>
#include <random>
#include <string>

#include "analysis/text_format.h"

namespace gpuutil {
namespace {

// What these functions printed before: printf into 32 bytes.
std::string printf_1f(double v, const char* suffix) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f%s", v, suffix);
  return buf;
}

TEST(TextFormat, MsTextIsPrintfsOneDecimalForEveryKindOfDuration) {
  for (const int64_t ns : {int64_t(0), int64_t(1), int64_t(49'999), int64_t(50'000), int64_t(150'000),
                           int64_t(250'000), int64_t(-50'000), int64_t(1'234'567'890),
                           std::numeric_limits<int64_t>::max(), std::numeric_limits<int64_t>::min()}) {
    EXPECT_EQ(ms_text(ns), printf_1f(static_cast<double>(ns) / 1e6, " ms")) << ns;
  }
  std::mt19937_64 rng(7);
  for (int i = 0; i < 200'000; ++i) {
    const auto ns = static_cast<int64_t>(rng() >> (rng() % 64));
    ASSERT_EQ(ms_text(ns), printf_1f(static_cast<double>(ns) / 1e6, " ms")) << ns;
  }
}

TEST(TextFormat, PctTextIsPrintfsOneDecimalIncludingTiesAndNonFinite) {
  for (const double f : {0.0, -0.0, 0.0005, 0.0015, 0.0025, 0.05, 0.853, 1.0, 12.5, -0.25, 1e300,
                         std::numeric_limits<double>::infinity(), -std::numeric_limits<double>::infinity(),
                         std::numeric_limits<double>::quiet_NaN(), std::numeric_limits<double>::denorm_min()}) {
    EXPECT_EQ(pct_text(f), printf_1f(f * 100.0, "%")) << f;
  }
  std::mt19937_64 rng(11);
  std::uniform_real_distribution<double> share(0.0, 1.0);
  for (int i = 0; i < 200'000; ++i) {
    const double f = share(rng);
    ASSERT_EQ(pct_text(f), printf_1f(f * 100.0, "%")) << f;
  }
}

}  // namespace
}  // namespace gpuutil

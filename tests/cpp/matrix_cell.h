// The fake CUPTI's matrix cell a parameterised live test runs under
// (tests/fake_cupti/fake_cupti_matrix.h), and, in one place, why today's
// collector fails some cells (issue 27). A test skips such a cell with
// ISSUE27_SKIP(reason); the collector's fix removes the skip.
// `grep -rn "issue 27:" tests/` lists them all, and
// GPUUTIL_ISSUE27_UNSKIP=1 runs them anyway (to watch them fail, or pass).
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>
#include <optional>
#include <string>

#include "fake_cupti_client.h"
#include "fake_cupti_matrix.h"

namespace gpuutil::testing {

inline bool issue27_unskip() { return std::getenv("GPUUTIL_ISSUE27_UNSKIP") != nullptr; }

// Skips the running test with `reason` (which starts "issue 27: "), unless
// GPUUTIL_ISSUE27_UNSKIP is set.
#define ISSUE27_SKIP(reason) \
  if (!::gpuutil::testing::issue27_unskip()) GTEST_SKIP() << (reason)

class MatrixTest : public ::testing::TestWithParam<fake_cupti_matrix> {
 protected:
  void SetUp() override {
    cell_.emplace(GetParam());
  }
  void TearDown() override { cell_.reset(); }
  const fake_cupti_matrix& cell() const { return GetParam(); }
  // Device records are reserved at launch in the buffer that also takes
  // later records (CUDA 13's placement), so that buffer straddles work.
  bool reserved_in_writing_buffer() const {
    return cell().device_records == FAKE_CUPTI_DEVICE_RECORDS_IN_THREAD_BUFFER;
  }

 private:
  std::optional<ScopedCell> cell_;
};

inline std::string cell_name(const ::testing::TestParamInfo<fake_cupti_matrix>& p) {
  return fake_matrix::test_name(p.param);
}

}  // namespace gpuutil::testing

// The GPU check's kernel: spins for `cycles` SM clocks, JIT-compiled by the
// driver from this PTX (gpu_check_driver, gpu_check_probe). Plain text; no
// vendor API.
#pragma once

namespace gpu_check {

inline constexpr const char* kSpinPtx = R"(
.version 7.0
.target sm_70
.address_size 64
.visible .entry spin(.param .u64 cycles)
{
  .reg .pred %p;
  .reg .u64 %rd<5>;
  ld.param.u64 %rd1, [cycles];
  mov.u64 %rd2, %clock64;
LOOP:
  mov.u64 %rd3, %clock64;
  sub.u64 %rd4, %rd3, %rd2;
  setp.lt.u64 %p, %rd4, %rd1;
  @%p bra LOOP;
  ret;
}
)";

}  // namespace gpu_check

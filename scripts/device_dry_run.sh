#!/usr/bin/env bash
# Acts out, on this machine, what scripts/device_build.sh meets on the lent
# GPU machine, to catch a device build failure before device time is spent.
# It copies the working tree the way the device tool does (tracked and
# untracked-not-ignored files, nothing built) into a fresh temp folder and
# builds there with: the vendored nlohmann/json and simdjson
# (GPUUTIL_VENDORED_DEPS=ON), zlib hidden, no CUDA toolkit headers
# (GPUUTIL_CUDA_INCLUDE_SEARCH=OFF, CUDA_HOME unset) but the headers the
# device's Python packages have (nvidia-cuda-cupti, nvidia-cuda-runtime and
# nvidia-nvtx 13.0 wheels, Triton's bundled CUDA headers; downloaded once into
# build-device-cache/, ignored), through the device command itself:
# `scripts/gpu_check.sh --self-test` (build, LibTorch hook, the GPU check on
# the fake CUPTI, its CUPTI probe first; failed checks are accepted only when
# they are exactly those tests/python/test_gpu_check.py expects to fail on
# today's collector). Then it checks that nothing came from the system (CMake cache,
# compile commands, linked libraries), imports gpuutil from the install
# folder, analyses a plain trace, sees a gzip trace fail with the no-gzip
# message, runs the live-path tests against the fake CUPTI, and prints how
# long the build took. Needs scripts/bootstrap.sh to have made .venv.
#
#   scripts/device_dry_run.sh [--keep]    (--keep leaves the temp folder)
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
keep=0
[ "${1:-}" = "--keep" ] && keep=1
py=$repo/.venv/bin/python
[ -x "$py" ] || { echo "device_dry_run: $py missing: run scripts/bootstrap.sh first" >&2; exit 2; }

# What the device's Python has for headers (CUDA 13.0 wheels, no
# nvidia-cuda-crt, Triton 3.6.0 with its bundled CUDA 12.8 headers): the three
# nvidia wheels, and of Triton's wheel only triton/backends/nvidia/include.
cache=$repo/build-device-cache
wheels=(nvidia-cuda-cupti==13.0.85 nvidia-cuda-runtime==13.0.96 nvidia-nvtx==13.0.85)
triton=triton==3.6.0
if [ "$(cat "$cache/site/.complete" 2>/dev/null)" != "${wheels[*]} $triton" ]; then
  echo "[dry_run] fetching ${wheels[*]} and $triton's headers into $cache (once)"
  rm -rf "$cache" && mkdir -p "$cache/wheels" "$cache/site"
  "$py" -m pip download -q --no-deps --only-binary=:all: -d "$cache/wheels" "${wheels[@]}" "$triton"
  "$py" -m pip install -q --no-deps --no-index --target "$cache/site" "$cache"/wheels/nvidia_*.whl
  "$py" -c 'import sys, zipfile
z = zipfile.ZipFile(sys.argv[1])
z.extractall(sys.argv[2], [n for n in z.namelist() if n.startswith("triton/backends/nvidia/include/")])' \
    "$cache"/wheels/triton-*.whl "$cache/site"
  rm -rf "$cache/wheels"
  echo "${wheels[*]} $triton" > "$cache/site/.complete"
fi

tmp=$(mktemp -d /tmp/gpuutil-device-dry-run.XXXXXX)
if [ "$keep" = 0 ]; then trap 'rm -rf "$tmp"' EXIT; fi
work=$tmp/repo
mkdir -p "$work"
(cd "$repo" && git ls-files -z -co --exclude-standard) |
  (cd "$repo" && while IFS= read -r -d '' f; do [ -e "$f" ] || [ -L "$f" ] && printf '%s\0' "$f"; done) |
  (cd "$repo" && tar --null -T - -cf -) | tar -xf - -C "$work"
bytes=$(du -sb "$work" | cut -f1)
echo "[dry_run] working tree copied to $work: $(find "$work" -type f | wc -l) files, $((bytes / 1024)) KiB (device limit 64 MiB)"
[ "$bytes" -lt $((64 * 1024 * 1024)) ] || { echo "[dry_run] FAIL: the working tree is over 64 MiB" >&2; exit 1; }
if [ -e "$work/build-device" ]; then echo "[dry_run] FAIL: build-device/ travelled (not ignored?)" >&2; exit 1; fi

# The device command itself, in its --self-test form (the fake CUPTI plays
# the GPU), with the machine's situation simulated.
prefix=$work/build-device/site
out=$tmp/out
check_rc=0
# GPUUTIL_GPU_CHECK_BUDGET_S: no deadline here (the 240 s are the 16-core
# machine's; this rehearsal runs every scenario on two cores).
env -u CUDA_HOME PYTHON="$py" GPUUTIL_DEVICE_BUILD_PYTHONPATH="$cache/site" OUT="$out" GPUUTIL_GPU_CHECK_BUDGET_S=3600 \
  GPUUTIL_DEVICE_BUILD_ARGS="-DGPUUTIL_VENDORED_DEPS=ON -DCMAKE_DISABLE_FIND_PACKAGE_ZLIB=TRUE -DGPUUTIL_CUDA_INCLUDE_SEARCH=OFF" \
  bash "$work/scripts/gpu_check.sh" --self-test > "$tmp/check.log" 2>&1 || check_rc=$?
grep -F "[gpu_check.sh]" "$tmp/check.log"
tail -n 45 "$tmp/check.log"
build_s=$(sed -n 's/.*build done in \([0-9]*\) s.*/\1/p' "$tmp/check.log")
# Exit 1 is accepted only when the failed checks are exactly those
# tests/python/test_gpu_check.py expects to fail on today's collector; no
# scenario may be skipped for the deadline.
if { [ "$check_rc" = 0 ] || [ "$check_rc" = 1 ]; } && [ -f "$out/gpu_check.json" ]; then
  if "$py" - "$out/gpu_check.json" "$repo/tests/python/test_gpu_check.py" <<'PY'
import ast, json, sys
rows = json.load(open(sys.argv[1]))["rows"]
failed = {(r["scenario"], r["check"]) for r in rows if r["result"] == "FAIL"}
tree = ast.parse(open(sys.argv[2]).read())
expected = next(ast.literal_eval(n.value) for n in tree.body if isinstance(n, ast.Assign)
                and getattr(n.targets[0], "id", "") == "EXPECTED_TO_FAIL")
if failed != set(expected):
    sys.exit(f"[dry_run] failed checks {sorted(failed)} are not the expected {sorted(expected)}")
late = [r["scenario"] for r in rows if "deadline" in r["note"]]
if late:
    sys.exit(f"[dry_run] skipped for the deadline: {late}")
print(f"[dry_run] gpu_check --self-test: its {len(failed)} failed checks are those expected on today's collector")
PY
  then check_rc=0; else check_rc=1; fi
fi
[ "$check_rc" = 0 ] || { echo "[dry_run] FAIL: scripts/gpu_check.sh --self-test exited $check_rc (log: $tmp/check.log)" >&2; keep=1; exit 1; }
[ -f "$out/gpu_check.json" ] || { echo "[dry_run] FAIL: no gpu_check.json under \$OUT" >&2; exit 1; }

fail() { echo "[dry_run] FAIL: $*" >&2; exit 1; }
bd=$work/build-device
cache_val() { sed -n "s/^$1:[A-Z]*=//p" "$bd/CMakeCache.txt"; }
case "$(cache_val GPUUTIL_CUPTI_INCLUDE_DIR)" in
  "$cache"/site/nvidia/*) ;;
  *) fail "cupti.h came from $(cache_val GPUUTIL_CUPTI_INCLUDE_DIR), not the wheel" ;;
esac
case "$(cache_val GPUUTIL_NVTX_INCLUDE_DIR)" in
  "$cache"/site/nvidia/*) ;;
  *) fail "nvtx3 came from $(cache_val GPUUTIL_NVTX_INCLUDE_DIR), not the wheel" ;;
esac
grep -q '^GTest_DIR' "$bd/CMakeCache.txt" && fail "GoogleTest was looked for"
grep -Eq '^(nlohmann_json|simdjson)_DIR:PATH=/' "$bd/CMakeCache.txt" && fail "a system nlohmann_json/simdjson was used"
grep -q 'usr/local/cuda' "$bd/compile_commands.json" && fail "a compile command names /usr/local/cuda"
grep -q 'GPUUTIL_HAVE_ZLIB' "$bd/compile_commands.json" && fail "built with zlib although it was hidden"
# Of Triton's CUDA 12.8 headers only crt/ is used, through its copy in the build tree.
deps=$("$(cache_val CMAKE_MAKE_PROGRAM)" -C "$bd" -t deps | tr -s ' ' '\n' | grep '^/' | sort -u)
printf '%s\n' "$deps" | grep '/triton/' && fail "the headers above came straight from Triton's CUDA 12.8 copy"
printf '%s\n' "$deps" | grep -q "$cache/site/nvidia/cu13/include/cupti_activity.h" || fail "cupti_activity.h not from the wheel"
n_crt=$(printf '%s\n' "$deps" | grep -c "$bd/gpuutil_cuda_crt/crt/" || true)
core=$(ls "$prefix"/gpuutil/_core*.so)
[ -f "$prefix/gpuutil/libgpuutil_nvtx.so" ] || fail "libgpuutil_nvtx.so not installed next to the package"
[ -f "$bd/tests/cpp/libfake_cupti.so" ] || fail "libfake_cupti.so not built"
[ -x "$bd/benchmarks/gpu_check_probe" ] || fail "gpu_check_probe not built"
ldd "$core" | grep -Eq 'lib(z|simdjson|deflate)\.so' && fail "_core links a system library: $(ldd "$core" | grep -E 'lib(z|simdjson|deflate)\.so')"
echo "[dry_run] headers from the wheels (and $n_crt crt/ headers copied from Triton's), vendored deps, no zlib, no GoogleTest, no system libraries linked: ok"

# Import from the install folder (outside the source tree) and analyse.
(cd "$tmp" && PYTHONPATH="$prefix" "$py" - "$prefix" <<'EOF') || fail "import/analyse check"
import gzip, json, os, sys
import gpuutil
assert gpuutil.__file__.startswith(sys.argv[1]), gpuutil.__file__
us = 1000
events = [{"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "pid": 1, "tid": 1, "ts": 0, "dur": 10 * us}]
for i in range(3):
    t = 1 * us + i * 3 * us
    events += [
        {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1, "ts": t, "dur": 5,
         "args": {"correlation": i + 1}},
        {"ph": "X", "cat": "kernel", "name": "gemm", "pid": 0, "tid": 7, "ts": t + 10, "dur": 2 * us,
         "args": {"device": 0, "stream": 7, "correlation": i + 1}},
    ]
doc = json.dumps({"traceEvents": events}).encode()
with open("t.json", "wb") as f:
    f.write(doc)
with open("t.json.gz", "wb") as f:
    f.write(gzip.compress(doc))
report = gpuutil.analyze("t.json")
steps = report["steps"]
assert len(steps) == 1 and steps[0]["devices"][0]["kernels"] == 3, steps
print("[dry_run] import gpuutil", gpuutil.__version__ if hasattr(gpuutil, "__version__") else "", "from", os.path.dirname(gpuutil.__file__))
print("[dry_run] plain trace: 1 step, 3 kernels")
try:
    gpuutil.analyze("t.json.gz")
except gpuutil.TraceError as e:
    msg = str(e)
    assert "no gzip support" in msg and "\n" not in msg, msg
    print("[dry_run] gzip trace fails as it should:", msg)
else:
    raise AssertionError("a gzip trace was read by a build without zlib")
EOF

# The live path against the fake CUPTI (tests find build-device/tests/cpp/libfake_cupti.so).
(cd "$work" && PYTHONPATH="$prefix" "$py" -m pytest -q -p no:cacheprovider \
  tests/python/test_live.py tests/python/test_live_faithful.py) || fail "live-path tests against the fake CUPTI"

# How long the same run takes on the lent machine (16 cores): the compile
# work of this build (ninja's logs: the core build and the LibTorch hook)
# spread over 16 cores, never below its longest compile, plus the links and
# everything that is not a compile (configure, pip, the check itself) as
# measured here; the same speed per core assumed.
"$py" - "$bd/.ninja_log" "$bd/torch_ext" "$out/gpu_check.json" "${build_s:-0}" <<'PY' || true
import glob, json, os, sys
def edges(path):
    out = []
    for line in open(path):
        if line.startswith("#"):
            continue
        start, end, _, target = line.split("\t")[:4]
        out.append((int(start), int(end), target))
    return out
core = edges(sys.argv[1])
hook = [e for p in glob.glob(os.path.join(sys.argv[2], "**", ".ninja_log"), recursive=True) for e in edges(p)]
def split(es):
    comp = [(e - s) / 1e3 for s, e, t in es if t.endswith(".o")]
    link = [(e - s) / 1e3 for s, e, t in es if not t.endswith(".o")]
    wall = (max(e for _, e, _ in es) - min(s for s, _, _ in es)) / 1e3 if es else 0.0
    return comp, link, wall
cc, cl, cw = split(core)
hc, hl, hw = split(hook)
build = float(sys.argv[4])
check = json.load(open(sys.argv[3]))["elapsed_s"]
rest = build - cw - hw  # configure, pip, imports: not spread over cores
est = rest + max(sum(cc) / 16, max(cc, default=0)) + max(cl, default=0) + max(sum(hc) / 16, max(hc, default=0)) + sum(hl)
print(f"[dry_run] build here: {build:.0f} s = core ninja {cw:.0f} s ({sum(cc):.0f} s of compiles, longest "
      f"{max(cc, default=0):.0f} s; links {sum(cl):.0f} s) + hook {hw:.0f} s + the rest {rest:.0f} s; the check "
      f"{check:.0f} s")
print(f"[dry_run] estimate on 16 cores: build ~{est:.0f} s (links serial: ~{est - max(cl, default=0) + sum(cl):.0f} s)")
PY

echo "[dry_run] PASS: scripts/gpu_check.sh --self-test from a copy of the working tree; build (core + hook) ${build_s} s on $(nproc) cores"

# Progress lines for long shell stages (sourced by scripts/bootstrap.sh).
#
# say MSG: one line, "[bootstrap <seconds since start>s] MSG".
# with_progress WHAT CMD...: runs CMD and, while it runs, says at least
# every $GPUUTIL_PROGRESS_S seconds (default 20) that it still does, with
# the number of objects compiled into build/ so far; returns CMD's status.
# Redirect CMD's own output inside CMD (a function), never the call of
# with_progress: that would silence the progress lines too.
# (tests/python/test_progress_lines.py)
say() { echo "[bootstrap ${SECONDS}s] $*"; }
with_progress() {
  local what=$1; shift
  local every=${GPUUTIL_PROGRESS_S:-20}
  mkdir -p build
  local mark=build/.bootstrap-progress-mark
  touch "$mark"
  (
    while sleep "$every"; do
      n=$(find build -name '*.o' -newer "$mark" 2>/dev/null | wc -l)
      say "... still $what ($n objects compiled so far)"
    done
  ) &
  local ticker=$!
  local rc=0
  "$@" || rc=$?
  kill "$ticker" 2>/dev/null || true
  wait "$ticker" 2>/dev/null || true
  return "$rc"
}

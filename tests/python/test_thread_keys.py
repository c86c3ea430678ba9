"""Thread keys carry a generation through the Python step path: glibc gives
the pthread_t (CPython's ``threading.get_ident()``) of a thread that exited
to the next thread it starts, and the session tells the two apart by their
OS tids, so each keeps its own name in the reports (gpuutil/event_sink.h,
``thread_index``; the C++ side: tests/cpp/test_thread_keys.cpp)."""

from __future__ import annotations

import threading

import gpuutil
from gpuutil import _core

WAIT = "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__"


def test_two_threads_given_one_pthread_one_after_the_other_are_two_threads_with_their_own_names() -> None:
    seen = []
    with gpuutil.profile(report_interval_ms=0) as prof:
        path = prof._handle.path  # what collectors record ranges through
        slot = path.slot(WAIT)
        with prof.step():
            for name in ("loader-a", "loader-b"):
                def wait() -> None:
                    seen.append((threading.get_ident(), threading.get_native_id()))
                    path.add(slot, _core.now_ns() - 1000)

                t = threading.Thread(target=wait, name=name)
                t.start()
                t.join()
    (key_a, tid_a), (key_b, tid_b) = seen
    assert key_a == key_b, "glibc did not reuse the pthread_t; the test cannot show the merge"
    assert tid_a != tid_b
    host = {h["tid"]: h["name"] for h in prof.reports[0]["steps"][0]["host"]}
    assert host.get(tid_a) == "loader-a" and host.get(tid_b) == "loader-b", host

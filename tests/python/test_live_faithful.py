"""The Python live path against the faithful fake CUPTI (tests/fake_cupti):
the thread a PyTorch range was recorded on and the thread whose CUDA launch
CUPTI records must be one session thread (through the LibTorch hook and
through the Python fallback hooks), and torch.profiler gets CUPTI while it
runs, whichever of the two starts first.

Each scenario runs in a subprocess: CUPTI state is process-wide, and the
fake must be the library the collector loads (GPUUTIL_CUPTI_LIBRARY).
"""

import json
import os
import subprocess
import sys
import textwrap

import pytest

from test_live import _fake_cupti

torch = pytest.importorskip("torch")

# Shared by the scenarios: the fake, and its second CUPTI client as Kineto
# behaves under torch.profiler (registers its callbacks at prepare, disables
# its kinds and force-flushes at exit), wrapped around torch's own methods.
PRELUDE = textwrap.dedent(
    """
    import ctypes, json, sys, time
    import gpuutil
    import torch

    fake = ctypes.CDLL(sys.argv[1])
    fake.fake_cupti_reset(None)
    fake.fake_cupti_launch_kernel.argtypes = [ctypes.c_char_p, ctypes.c_uint32, ctypes.c_int64, ctypes.c_int64]

    class ClientStats(ctypes.Structure):
        _fields_ = [("kernels", ctypes.c_uint64), ("memcpys", ctypes.c_uint64), ("api_records", ctypes.c_uint64),
                    ("buffers", ctypes.c_uint64), ("foreign_buffers_rejected", ctypes.c_uint64),
                    ("last_record_end_ns", ctypes.c_int64)]

    fake.fake_cupti_second_client_stop.restype = ClientStats
    kineto = {}

    def as_kineto_does():
        P = torch.autograd.profiler.profile
        prepare, leave = P._prepare_trace, P.__exit__

        def _prepare_trace(self, *a, **k):
            r = prepare(self, *a, **k)
            fake.fake_cupti_second_client_start()
            return r

        def __exit__(self, *a, **k):
            r = leave(self, *a, **k)
            s = fake.fake_cupti_second_client_stop()
            kineto.update(kernels=s.kernels, foreign=s.foreign_buffers_rejected)
            return r

        P._prepare_trace, P.__exit__ = _prepare_trace, __exit__
        # This CPU build of torch cannot ask Kineto for CUDA activity; the
        # guard is told the profiler does, as it would be on a GPU.
        from gpuutil.torch import _profiler_guard
        _profiler_guard.traces_gpu = lambda prof: True

    def kernels(n):
        for _ in range(n):
            fake.fake_cupti_launch_kernel(b"gemm", 7, 200000, 5000)
        fake.fake_cupti_device_synchronize()

    def summary(prof):
        out = []
        for r in prof.reports:
            devices = r["steps"][0]["devices"]
            out.append({
                "kernels": devices[0]["kernels"] if devices else 0,
                "breakdown": devices[0]["breakdown_ns"] if devices else None,
                "diagnostics": {d["name"]: d["example"] for d in r["diagnostics"]},
            })
        return out
    """
)


def run(body: str, **env: str) -> dict:
    fake = _fake_cupti()
    code = PRELUDE + textwrap.dedent(body)
    environ = dict(os.environ, GPUUTIL_CUPTI_LIBRARY=fake, **env)
    out = subprocess.run([sys.executable, "-c", code, fake], capture_output=True, text=True, env=environ, timeout=180)
    assert out.returncode == 0, out.stderr[-4000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def _libtorch_hook_built() -> bool:
    from gpuutil.torch import _ext

    module, _ = _ext.load(build=False)
    return module is not None


@pytest.mark.skipif(not _libtorch_hook_built(), reason="the LibTorch hook is not built (python -m gpuutil.torch.build)")
def test_a_dataloader_range_from_the_libtorch_hook_and_the_launch_after_it_meet_on_one_thread():
    result = run(
        """
        with gpuutil.profile(report_interval_ms=0) as prof:
            for _ in range(3):
                with prof.step():
                    with torch.autograd.profiler.record_function(
                            "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__"):
                        time.sleep(0.02)
                    kernels(1)
        print(json.dumps(summary(prof)))
        """
    )
    assert len(result) == 3
    for step in result:
        assert "torch_hook_fallback" not in step["diagnostics"], "this test is about the LibTorch hook"
        # The gap before the kernel is the wait of the thread that launched it.
        assert step["breakdown"]["idle_dataloader"] >= 18_000_000, step
        # Were the wait on another thread, its 20 ms would be idle_host and
        # idle_dataloader would be near 0. What idle_host holds here is the
        # step's Python overhead: a few ms, more on a loaded machine (it
        # passed 10 ms once in a full run here), never the planted wait.
        assert step["breakdown"]["idle_host"] < step["breakdown"]["idle_dataloader"], step


def test_a_real_dataloader_wait_from_the_python_hooks_and_the_launch_after_it_meet_on_one_thread():
    result = run(
        """
        class Slow(torch.utils.data.Dataset):
            def __len__(self):
                return 64
            def __getitem__(self, i):
                time.sleep(0.005)
                return torch.zeros(4)

        loader = torch.utils.data.DataLoader(Slow(), batch_size=4, num_workers=0)
        with gpuutil.profile(report_interval_ms=0) as prof:
            batches = iter(loader)
            for _ in range(3):
                with prof.step():
                    next(batches)
                    kernels(1)
        print(json.dumps(summary(prof)))
        """,
        GPUUTIL_TORCH_HOOK="off",
    )
    assert len(result) == 3
    for step in result:
        assert "torch_hook_fallback" in step["diagnostics"], "this test is about the Python hooks"
        assert step["breakdown"]["idle_dataloader"] >= 18_000_000, step


def test_torch_profiler_started_inside_a_profile_keeps_its_kernels_and_gpuutil_resumes_after():
    result = run(
        """
        as_kineto_does()
        from torch.profiler import ProfilerActivity, profile
        with gpuutil.profile(report_interval_ms=0) as prof:
            with prof.step():
                kernels(1)
            with profile(activities=[ProfilerActivity.CPU]):
                with prof.step():
                    kernels(3)
            with prof.step():
                kernels(1)
        print(json.dumps({"steps": summary(prof), "kineto": kineto}))
        """
    )
    assert result["kineto"] == {"kernels": 3, "foreign": 0}
    steps = result["steps"]
    assert [s["kernels"] for s in steps] == [1, 0, 1]
    assert "gpu_collection_suspended" not in steps[0]["diagnostics"]
    assert "torch.profiler" in steps[1]["diagnostics"]["gpu_collection_suspended"]
    assert "gpu_collection_suspended" not in steps[2]["diagnostics"]


def test_torch_profiler_on_another_thread_keeps_its_kernels_and_step_boundaries_do_not_take_cupti_back():
    # The profiler state a step boundary reads is thread-local: on the
    # training thread it says "off" while another thread traces, and must
    # not undo the suspension its entry point made.
    result = run(
        """
        import threading
        as_kineto_does()
        from torch.profiler import ProfilerActivity, profile
        started, stop = threading.Event(), threading.Event()

        def other():
            with profile(activities=[ProfilerActivity.CPU]):
                started.set()
                stop.wait(60)

        with gpuutil.profile(report_interval_ms=0) as prof:
            with prof.step():
                kernels(1)
            th = threading.Thread(target=other)
            th.start()
            started.wait(60)
            for _ in range(2):
                with prof.step():
                    kernels(2)
            stop.set()
            th.join(60)
            for _ in range(2):
                with prof.step():
                    kernels(1)
        print(json.dumps({"steps": summary(prof), "kineto": kineto}))
        """
    )
    assert result["kineto"] == {"kernels": 4, "foreign": 0}
    steps = result["steps"]
    assert [s["kernels"] for s in steps] == [1, 0, 0, 1, 1]
    for s in steps[1:3]:
        assert "torch.profiler" in s["diagnostics"]["gpu_collection_suspended"], s
    for s in (steps[0], *steps[3:]):
        assert not {"gpu_collection_suspended", "cupti_foreign_buffers"} & set(s["diagnostics"]), s


def test_incomplete_steps_wall_is_named_outside_time_so_the_run_still_adds_up():
    # A bound forced down to one held step while one kernel runs 200 ms
    # through 5 ms steps: those steps are reported incomplete, kept out of
    # the run's figures, and their wall is outside time named "incomplete".
    result = run(
        """
        from gpuutil._live import CuptiCollector
        CuptiCollector.max_held_steps = 1
        with gpuutil.profile(report_interval_ms=0) as prof:
            with prof.step():
                fake.fake_cupti_launch_kernel(b"long_kernel", 7, 200_000_000, 5000)
                time.sleep(0.005)
            for _ in range(5):
                with prof.step():
                    time.sleep(0.005)
            fake.fake_cupti_device_synchronize()
            with prof.step():
                kernels(1)
        steps = [r["steps"][0] for r in prof.reports]
        print(json.dumps({"steps": steps, "summary": prof.summary()}))
        """
    )
    steps, s = result["steps"], result["summary"]
    incomplete = [st for st in steps if st.get("complete") is False]
    assert len(incomplete) >= 2, [st.get("complete") for st in steps]
    assert s["incomplete_steps"] == len(incomplete)
    assert s["outside_steps_breakdown_ns"]["incomplete"] == sum(st["wall_ns"] for st in incomplete)
    assert s["steps"] == len(steps) - len(incomplete)
    assert s["steps_wall_ns"] + s["outside_steps_ns"] == steps[-1]["end_ns"] - steps[0]["start_ns"]
    assert sum(s["outside_steps_breakdown_ns"].values()) == s["outside_steps_ns"]


def test_gpuutil_started_while_torch_profiler_runs_leaves_it_its_kernels_then_takes_over():
    result = run(
        """
        as_kineto_does()
        from torch.profiler import ProfilerActivity, profile
        with profile(activities=[ProfilerActivity.CPU]):
            prof = gpuutil.profile(report_interval_ms=0).start()
            with prof.step():
                kernels(2)
        with prof.step():
            kernels(1)
        prof.stop()
        print(json.dumps({"steps": summary(prof), "kineto": kineto}))
        """
    )
    assert result["kineto"] == {"kernels": 2, "foreign": 0}
    steps = result["steps"]
    assert [s["kernels"] for s in steps] == [0, 1]
    assert "torch.profiler was running" in steps[0]["diagnostics"]["gpu_collection_suspended"]
    assert "gpu_collection_suspended" not in steps[1]["diagnostics"]


def test_a_profiler_found_running_at_a_step_boundary_suspends_collection_until_it_is_gone():
    # Kineto started some other way than torch.autograd.profiler.profile
    # (the C++ API, on-demand tracing): caught at the next step boundary.
    result = run(
        """
        from gpuutil.torch import _profiler_guard
        running = [False]
        _profiler_guard.profiler_enabled = lambda: running[0]
        with gpuutil.profile(report_interval_ms=0) as prof:
            with prof.step():
                kernels(1)
            running[0] = True
            with prof.step():
                kernels(1)
            with prof.step():
                kernels(1)
            running[0] = False
            with prof.step():
                kernels(1)
            with prof.step():
                kernels(1)
        print(json.dumps(summary(prof)))
        """
    )
    suspended = ["gpu_collection_suspended" in s["diagnostics"] for s in result]
    # Found at the end of step 1, gone at the end of step 3.
    assert suspended == [False, True, True, True, False]
    assert result[2]["kernels"] == 0 and result[4]["kernels"] == 1


def test_python_thread_key_is_what_cupti_records():
    import threading

    from gpuutil._profile import thread_key

    # CPython's thread ident is pthread_self(); CUPTI records its low 32 bits.
    assert thread_key() == threading.get_ident() & 0xFFFFFFFF


def test_a_cpu_only_torch_profiler_started_before_gpuutil_leaves_it_every_kernel():
    # A CPU-only torch.profiler does not take CUPTI: gpuutil started inside
    # it collects as usual (issue 32, item 2: 3 kernels a step became 0).
    result = run(
        """
        from torch.profiler import ProfilerActivity, profile
        with profile(activities=[ProfilerActivity.CPU]):
            with gpuutil.profile(report_interval_ms=0) as prof:
                for _ in range(3):
                    with prof.step():
                        kernels(3)
        print(json.dumps(summary(prof)))
        """
    )
    assert [s["kernels"] for s in result] == [3, 3, 3]
    assert not any("gpu_collection_suspended" in s["diagnostics"] for s in result)


def test_a_profiler_that_does_not_take_cupti_found_at_a_step_boundary_suspends_nothing():
    # The NVTX/ITT emitters and the legacy profiler are on without Kineto's
    # CUPTI client: the step-boundary check must tell them from one that is.
    result = run(
        """
        from gpuutil.torch import _profiler_guard
        types = torch._C._profiler.ActiveProfilerType
        running = [False]
        _profiler_guard.profiler_enabled = lambda: running[0]
        torch._C._autograd._profiler_type = lambda: types.NVTX if running[0] else types.NONE
        with gpuutil.profile(report_interval_ms=0) as prof:
            for i in range(4):
                running[0] = i in (1, 2)
                with prof.step():
                    kernels(1)
        print(json.dumps(summary(prof)))
        """
    )
    assert [s["kernels"] for s in result] == [1, 1, 1, 1]
    assert not any("gpu_collection_suspended" in s["diagnostics"] for s in result)


# ---- the fake CUPTI's matrix (issue 27; docs/live-collection.md, "The fake's matrix") ----

# Why today's collector fails a cell; the C++ suites say the same
# (tests/cpp/matrix_cell.h). `grep -rn "issue 27:" tests/` lists every skip.


def test_the_python_path_attributes_dataloader_waits_and_yields_to_torch_profiler_under_every_ci_cell():
    # One subprocess plays every cell CI runs (the fake names them; the same
    # list as the C++ suites), choosing each with fake_cupti_configure_text.
    result = run(
        """
        fake.fake_cupti_cells_for_run.restype = ctypes.c_char_p
        fake.fake_cupti_configure_text.argtypes = [ctypes.c_char_p]
        cells = fake.fake_cupti_cells_for_run().decode().split(";")
        as_kineto_does()
        from torch.profiler import ProfilerActivity, profile
        out = {}
        for cell in cells:
            assert fake.fake_cupti_configure_text(cell.encode()) == 0, cell
            fake.fake_cupti_reset(None)
            kineto.clear()
            # detail="always": the planted wait is a record_function range,
            # which only the detail tier records (a real DataLoader's wait is
            # seen in every tier); "sampled" makes the 4th step a detail step
            # only when a finding fired first, which depends on timing.
            with gpuutil.profile(report_interval_ms=0, detail="always") as prof:
                for i in range(4):
                    with prof.step():
                        with torch.autograd.profiler.record_function(
                                "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__"):
                            time.sleep(0.02)
                        if i == 2:
                            with profile(activities=[ProfilerActivity.CPU]):
                                kernels(3)
                        else:
                            kernels(1)
            out[cell] = {"steps": summary(prof), "kineto": dict(kineto)}
        fake.fake_cupti_configure(None)
        print(json.dumps(out))
        """
    )
    assert "default" in result and "seal=0" in result, sorted(result)
    for cell, r in result.items():
        steps = r["steps"]
        assert [s["kernels"] for s in steps] == [1, 1, 0, 1], (cell, steps)
        assert r["kineto"] == {"kernels": 3, "foreign": 0}, (cell, r["kineto"])
        assert "torch.profiler" in steps[2]["diagnostics"]["gpu_collection_suspended"], (cell, steps[2])
        for s in (steps[0], steps[1], steps[3]):
            assert s["breakdown"]["idle_dataloader"] >= 18_000_000, (cell, s)
            assert "cupti_completion_timeout" not in s["diagnostics"], (cell, s)


def test_a_held_empty_buffer_delays_no_report():
    result = run(
        """
        t = time.perf_counter()
        with gpuutil.profile(report_interval_ms=0) as prof:
            for _ in range(3):
                with prof.step():
                    kernels(1)
        print(json.dumps({"s": time.perf_counter() - t, "steps": summary(prof)}))
        """,
        GPUUTIL_FAKE_CUPTI_MATRIX="hold=1",
    )
    assert [s["kernels"] for s in result["steps"]] == [1, 1, 1], result
    assert not any("cupti_completion_timeout" in s["diagnostics"] for s in result["steps"]), result
    assert result["s"] < 1.5, "the profile waited out the completion bound: %s" % result


# Kineto's on-demand tracing (dynolog, KINETO_USE_DAEMON) starts CUPTI from
# its own thread; no torch.profiler object exists for the guard to see, and
# the thread-local torch._C._autograd._profiler_enabled() says nothing. The
# C++ collector sees it (docs/live-collection.md, "Coexistence").
ON_DEMAND = """
        import threading
        def on_demand(start):
            t = threading.Thread(target=fake.fake_cupti_second_client_start if start
                                 else fake.fake_cupti_second_client_stop)
            t.start()
            t.join()
    """


def test_a_trace_started_behind_gpuutils_back_is_reported_as_a_takeover_not_as_idle_steps():
    # Kineto registers its own (TSC) clock when it starts a trace (libkineto
    # CuptiTimestamp.cpp): seen at the next flush, between steps too.
    result = run(
        ON_DEMAND
        + """
        with gpuutil.profile(report_interval_ms=0) as prof:
            with prof.step():
                kernels(1)
            time.sleep(0.05)  # dynolog's trigger comes while the loop runs on
            on_demand(True)
            with prof.step():
                kernels(1)
            on_demand(False)
            with prof.step():
                kernels(1)
        print(json.dumps(summary(prof)))
        """,
        GPUUTIL_FAKE_CUPTI_MATRIX="client=own_clock",
    )
    assert result[0]["kernels"] == 1 and "cupti_taken_over" not in result[0]["diagnostics"], result[0]
    for step in result[1:]:
        assert "timestamp callback" in step["diagnostics"]["cupti_taken_over"], step
        assert "gpu_collection_off" in step["diagnostics"], step


def test_a_trace_started_behind_gpuutils_back_mid_step_is_seen_from_its_silent_buffers():
    # Kineto keeping CUPTI's clock: gpuutil's buffer of the running step went
    # to it, and nothing came back for GPUUTIL_CUPTI_TAKEOVER_MS of flushing
    # while the loop ran on, making calls whose API records fill buffers
    # (evidence that CUPTI asks another client for them: a GPU stuck with
    # the host blocked makes no calls, and is named stuck instead).
    result = run(
        ON_DEMAND
        + """
        with gpuutil.profile(report_interval_ms=0) as prof:
            with prof.step():
                kernels(1)
            time.sleep(0.05)
            with prof.step():
                fake.fake_cupti_launch_kernel(b"gemm", 7, 200000, 5000)
                on_demand(True)
                for _ in range(40):  # 40,000 calls: more API records than the held buffer and one more take
                    for _ in range(1000):
                        fake.fake_cupti_launch_kernel(b"small", 7, 1000, 1000)
                    time.sleep(0.005)
                kernels(1)
            on_demand(False)
            with prof.step():
                kernels(1)
        print(json.dumps(summary(prof)))
        """,
        GPUUTIL_CUPTI_TAKEOVER_MS="300",
    )
    assert result[0]["kernels"] == 1 and "cupti_taken_over" not in result[0]["diagnostics"], result[0]
    for step in result[1:]:
        assert "no activity buffer" in step["diagnostics"]["cupti_taken_over"], step
        assert "gpu_collection_off" in step["diagnostics"], step


def test_kineto_tearing_cupti_down_after_its_trace_is_said_not_reported_as_idle_steps():
    # TEARDOWN_CUPTI=1: Kineto calls cuptiFinalize after its trace, after
    # gpuutil took CUPTI back; gpuutil sees it and attaches again.
    result = run(
        """
        as_kineto_does()
        from torch.profiler import ProfilerActivity, profile
        with gpuutil.profile(report_interval_ms=0) as prof:
            with prof.step():
                kernels(1)
            with profile(activities=[ProfilerActivity.CPU]):
                with prof.step():
                    kernels(3)
            fake.fake_cupti_wait()  # its teardown, 20 ms after its stop
            for _ in range(3):
                with prof.step():
                    kernels(1)
                time.sleep(0.05)
        print(json.dumps(summary(prof)))
        """,
        GPUUTIL_FAKE_CUPTI_MATRIX="client=teardown",
        TEARDOWN_CUPTI="1",
    )
    assert result[0]["kernels"] == 1
    said = ("gpu_collection_off", "gpu_collection_suspended", "cupti_taken_over")
    for step in result[2:]:
        assert step["kernels"] == 1 or any(d in step["diagnostics"] for d in said), step
    assert any("cupti_taken_over" in s["diagnostics"] for s in result[2:]), result
    assert "cuptiFinalize" in result[2]["diagnostics"].get("cupti_taken_over", "cuptiFinalize"), result[2]
    assert "TEARDOWN_CUPTI=1" in result[0]["diagnostics"]["cupti_kineto_env"], result[0]
    # Nobody holds CUPTI after a finalize: gpuutil collects again.
    assert result[-1]["kernels"] == 1 and "cupti_taken_over" not in result[-1]["diagnostics"], result[-1]


def test_torch_imported_after_the_profile_started_still_hands_cupti_to_torch_profiler():
    # The guard is installed when the program imports torch (an import hook),
    # not only when torch was imported before gpuutil.profile() started.
    fake = _fake_cupti()
    code = textwrap.dedent(
        """
        import ctypes, json, sys, time
        import gpuutil
        fake = ctypes.CDLL(sys.argv[1])
        fake.fake_cupti_reset(None)
        fake.fake_cupti_launch_kernel.argtypes = [ctypes.c_char_p, ctypes.c_uint32, ctypes.c_int64, ctypes.c_int64]
        class ClientStats(ctypes.Structure):
            _fields_ = [("kernels", ctypes.c_uint64), ("memcpys", ctypes.c_uint64), ("api_records", ctypes.c_uint64),
                        ("buffers", ctypes.c_uint64), ("foreign_buffers_rejected", ctypes.c_uint64),
                        ("last_record_end_ns", ctypes.c_int64)]
        fake.fake_cupti_second_client_stop.restype = ClientStats
        def kernels(n):
            for _ in range(n):
                fake.fake_cupti_launch_kernel(b"gemm", 7, 200000, 5000)
            fake.fake_cupti_device_synchronize()

        prof = gpuutil.profile(report_interval_ms=0).start()
        assert "torch" not in sys.modules
        with prof.step():
            kernels(1)
        import torch  # after the profile started
        # Kineto's CUPTI client, inside torch's own prepare/disable calls.
        from torch.autograd import profiler as P
        from gpuutil.torch import _profiler_guard
        _profiler_guard.traces_gpu = lambda p: True  # a CPU build cannot ask for CUDA activity
        kineto = {}
        prepare, disable = P._prepare_profiler, P._disable_profiler
        def _prepare_profiler(*a, **k):
            r = prepare(*a, **k)
            fake.fake_cupti_second_client_start()
            return r
        def _disable_profiler(*a, **k):
            r = disable(*a, **k)
            s = fake.fake_cupti_second_client_stop()
            kineto.update(kernels=s.kernels, foreign=s.foreign_buffers_rejected)
            return r
        P._prepare_profiler, P._disable_profiler = _prepare_profiler, _disable_profiler
        from torch.profiler import ProfilerActivity, profile
        with profile(activities=[ProfilerActivity.CPU]):
            with prof.step():
                kernels(3)
        with prof.step():
            kernels(1)
        prof.stop()
        out = []
        for r in prof.reports:
            devices = r["steps"][0]["devices"]
            out.append({"kernels": devices[0]["kernels"] if devices else 0,
                        "diagnostics": {d["name"]: d["example"] for d in r["diagnostics"]}})
        print(json.dumps({"steps": out, "kineto": kineto}))
        """
    )
    environ = dict(os.environ, GPUUTIL_CUPTI_LIBRARY=fake)
    done = subprocess.run([sys.executable, "-c", code, fake], capture_output=True, text=True, env=environ, timeout=180)
    assert done.returncode == 0, done.stderr[-4000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["kineto"] == {"kernels": 3, "foreign": 0}, result
    steps = result["steps"]
    assert [s["kernels"] for s in steps] == [1, 0, 1], steps
    assert "torch.profiler" in steps[1]["diagnostics"]["gpu_collection_suspended"], steps[1]
    assert "gpu_collection_suspended" not in steps[2]["diagnostics"], steps[2]


SUBSCRIPTION_AROUND_IMPORT = """
    import ctypes, json, sys, time
    import gpuutil
    fake = ctypes.CDLL(sys.argv[1])
    fake.fake_cupti_reset(None)
    fake.fake_cupti_launch_kernel.argtypes = [ctypes.c_char_p, ctypes.c_uint32, ctypes.c_int64, ctypes.c_int64]
    fake.fake_cupti_other_subscriber.argtypes = [ctypes.c_char_p]
    KINETO_SUBSCRIBES = {kineto_subscribes}

    def kernels(n):
        for _ in range(n):
            fake.fake_cupti_launch_kernel(b"gemm", 7, 200000, 5000)
        fake.fake_cupti_device_synchronize()

    prof = gpuutil.profile(report_interval_ms=0).start()
    cupti = [c for c in prof._collectors if c.name == "cupti"][0]
    seen = {{}}

    class DuringImport:
        # Sees torch's first submodule import, while torch's own code runs
        # (where libkineto_init may subscribe); finds nothing itself.
        def find_spec(self, fullname, path, target=None):
            if fullname.startswith("torch.") and "during" not in seen:
                seen["during"] = cupti.counters()["api_callbacks_on"]
                if KINETO_SUBSCRIBES:
                    fake.fake_cupti_other_subscriber(b"Kineto")  # and keeps it
            return None

    with prof.step():
        kernels(1)
    seen["before"] = cupti.counters()["api_callbacks_on"]
    sys.meta_path.insert(0, DuringImport())
    import torch  # after the profile started
    seen["after"] = cupti.counters()["api_callbacks_on"]
    with prof.step():
        kernels(2)
    if KINETO_SUBSCRIBES:
        fake.fake_cupti_other_subscriber(None)  # (a later Kineto subscribes lazily and lets go)
        time.sleep(1.1)  # gpuutil asks again at a step boundary, at most once a second
    with prof.step():
        kernels(1)
    with prof.step():
        kernels(1)
    seen["end"] = cupti.counters()["api_callbacks_on"]
    seen["resubscribed"] = cupti.counters()["resubscribed"]
    prof.stop()
    steps = []
    for r in prof.reports:
        devices = r["steps"][0]["devices"]
        steps.append({{"kernels": devices[0]["kernels"] if devices else 0,
                      "complete": r["steps"][0].get("complete", True),
                      "diagnostics": {{d["name"]: d["example"] for d in r["diagnostics"]}}}})
    print(json.dumps({{"seen": seen, "steps": steps}}))
"""


def _subscription_around_import(kineto_subscribes: bool) -> dict:
    fake = _fake_cupti()
    code = textwrap.dedent(SUBSCRIPTION_AROUND_IMPORT.format(kineto_subscribes=kineto_subscribes))
    environ = dict(os.environ, GPUUTIL_CUPTI_LIBRARY=fake)
    done = subprocess.run([sys.executable, "-c", code, fake], capture_output=True, text=True, env=environ, timeout=180)
    assert done.returncode == 0, done.stderr[-4000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_gpuutil_lets_go_of_the_cupti_subscription_while_torch_imports_and_takes_it_back_after():
    # Kineto before its lazy subscription subscribes in libkineto_init and
    # goes CPU-only for good when gpuutil holds the subscription then.
    result = _subscription_around_import(kineto_subscribes=False)
    seen = result["seen"]
    assert seen["before"] is True, seen
    assert seen["during"] is False, "gpuutil held the subscription while torch imported"
    assert seen["after"] is True and seen["end"] is True, seen
    assert [s["kernels"] for s in result["steps"]] == [1, 2, 1, 1], result["steps"]
    assert all("cupti_subscriber_other" not in s["diagnostics"] for s in result["steps"]), result["steps"]


def test_a_client_that_subscribes_while_torch_imports_keeps_it_and_gpuutil_stays_right_without_callbacks():
    result = _subscription_around_import(kineto_subscribes=True)
    seen = result["seen"]
    assert seen["during"] is False and seen["after"] is False, seen
    steps = result["steps"]
    # Launches are learnt from their API records meanwhile: every kernel in
    # its step, every step complete; the report says why.
    assert [s["kernels"] for s in steps] == [1, 2, 1, 1], steps
    assert all(s["complete"] for s in steps), steps
    assert "Kineto" in steps[1]["diagnostics"]["cupti_subscriber_other"], steps[1]
    # Once it lets go, gpuutil asks again at a step boundary and gets it.
    assert seen["end"] is True and seen["resubscribed"] >= 1, seen


MONITOR = """
        import torch.profiler._cupti_monitor as mon
        # The monitor needs cupti-python and a GPU; its CUPTI client is the
        # fake's second client here (its own callbacks, kinds, forced flush at stop).
        def _start(self):
            fake.fake_cupti_second_client_start()
            self._started = True
        def _stop(self):
            s = fake.fake_cupti_second_client_stop()
            kineto.update(kernels=s.kernels, foreign=s.foreign_buffers_rejected)
            self._started = False
        mon.CuptiMonitor.start, mon.CuptiMonitor.stop = _start, _stop
        monitor = mon.CuptiMonitor.__new__(mon.CuptiMonitor)
    """


def test_torchs_cupti_monitor_gets_cupti_while_it_runs_and_gpuutil_takes_it_back_after():
    result = run(
        MONITOR
        + """
        with gpuutil.profile(report_interval_ms=0) as prof:
            with prof.step():
                kernels(1)
            monitor.start()
            with prof.step():
                kernels(3)
            monitor.stop()
            with prof.step():
                kernels(1)
        print(json.dumps({"steps": summary(prof), "monitor": kineto}))
        """
    )
    assert result["monitor"] == {"kernels": 3, "foreign": 0}, result
    steps = result["steps"]
    assert [s["kernels"] for s in steps] == [1, 0, 1], steps
    assert "CUPTI monitor" in steps[1]["diagnostics"]["gpu_collection_suspended"], steps[1]
    assert "gpu_collection_suspended" not in steps[2]["diagnostics"], steps[2]


def test_gpuutil_started_while_torchs_cupti_monitor_collects_waits_until_it_stops():
    result = run(
        MONITOR
        + """
        monitor.start()
        mon._monitor_singleton = monitor
        with gpuutil.profile(report_interval_ms=0) as prof:
            with prof.step():
                kernels(2)
            with prof.step():
                kernels(1)
            monitor.stop()
            mon._monitor_singleton = None
            with prof.step():
                kernels(1)
        print(json.dumps({"steps": summary(prof), "monitor": kineto}))
        """
    )
    assert result["monitor"] == {"kernels": 3, "foreign": 0}, result
    steps = result["steps"]
    assert [s["kernels"] for s in steps] == [0, 0, 1], steps
    for s in steps[:2]:
        assert "CUPTI monitor" in s["diagnostics"]["gpu_collection_suspended"], s
    assert "gpu_collection_suspended" not in steps[2]["diagnostics"], steps[2]


def test_emit_itt_around_steps_suspends_nothing():
    # The ITT emitter sets the autograd profiler's state with no CUPTI client
    # (the real torch API; emit_nvtx needs a CUDA build and is the same
    # ActiveProfilerType check, pinned above with a stand-in).
    result = run(
        """
        with torch.autograd.profiler.emit_itt():
            with gpuutil.profile(report_interval_ms=0) as prof:
                with prof.step():
                    kernels(1)
        steps = summary(prof)
        with gpuutil.profile(report_interval_ms=0) as prof:
            with prof.step():
                kernels(1)
            with torch.autograd.profiler.emit_itt():
                for _ in range(2):
                    with prof.step():
                        kernels(1)
            with prof.step():
                kernels(1)
        print(json.dumps(steps + summary(prof)))
        """
    )
    assert [s["kernels"] for s in result] == [1, 1, 1, 1, 1], result
    assert not any("gpu_collection_suspended" in s["diagnostics"] for s in result), result

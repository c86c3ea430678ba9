"""Tests of the fleet identity on gpuutil's Prometheus series
(gpuutil.fleet.identity, gpuutil.export.prometheus_families).

Pins: job_id comes from the argument, else SLURM_JOB_ID, else
TORCHELASTIC_RUN_ID (not torchrun's default "none"), else the Kubernetes
pod, else the script; the label is job_id, never job; GPUs are named by an
explicit override or GPUUTIL_GPU_UUIDS (bad entries refused), by torch's
UUID with NVML's "GPU-" prefix, and, through NVML (the fake libnvidia-ml),
with NVML's exact spelling and a MIG instance's own UUID beside its
parent's; per-device series carry UUID; gpuutil_gpu_info and the
attached-seconds counter exist only while a profile runs (its job_id
reaching the exporter through on_profile_start); FLOPs, peak and user units
are exported; one series per GPU per job per bucket.
"""

from __future__ import annotations

import time

import pytest

import gpuutil
from gpuutil.export.prometheus_families import ReportTotals
from gpuutil.fleet import identity

from test_nvml import FAKE, fake_uuid, torch_like

pytest.importorskip("prometheus_client")


def _step(rank=0, device=0, wall=1000, flops=5e9, peak=1e15):
    return {"steps": [{"step": 0, "wall_ns": wall, "devices": [{
        "rank": rank, "device": device, "wall_ns": wall, "busy_ns": 600, "flops": flops, "peak_flops_per_s": peak,
        "breakdown_ns": {"compute": 600, "idle_dataloader": 400}}]}]}


def _series(metrics):
    return {name: samples for name, _, _, samples in metrics.families()}


@pytest.mark.parametrize("env, argv0, expected", [
    ({"SLURM_JOB_ID": "4242", "TORCHELASTIC_RUN_ID": "r1"}, "train.py", ("4242", "SLURM_JOB_ID")),
    ({"TORCHELASTIC_RUN_ID": "r1", "KUBERNETES_SERVICE_HOST": "10.0.0.1", "POD_NAME": "p"}, "t.py",
     ("r1", "TORCHELASTIC_RUN_ID")),
    ({"TORCHELASTIC_RUN_ID": "none"}, "/opt/train.py", ("train", "script")),
    ({"KUBERNETES_SERVICE_HOST": "10.0.0.1", "POD_NAME": "bert-0", "POD_NAMESPACE": "ml"}, "t.py",
     ("ml/bert-0", "kubernetes")),
    ({"KUBERNETES_SERVICE_HOST": "10.0.0.1", "HOSTNAME": "bert-1"}, "t.py", (None, "kubernetes")),
    ({}, "/usr/lib/python3/site-packages/pytest/__main__.py", ("pytest", "script")),
    ({}, "-c", ("python", "script")),
])
def test_job_id_comes_from_the_scheduler_then_the_script(env, argv0, expected):
    job, source = identity.job_id_and_source(None, env, argv0)
    assert source == expected[1]
    if expected[0] is not None:
        assert job == expected[0]
    else:  # the namespace from the service account's file, when this machine has one
        assert job.endswith("bert-1")


def test_an_explicit_job_id_wins_and_an_empty_one_is_refused():
    assert identity.job_id(" nightly-7 ", {"SLURM_JOB_ID": "1"}) == "nightly-7"
    with pytest.raises(ValueError, match="job_id must be a non-empty string"):
        identity.job_id("  ")
    with pytest.raises(ValueError):
        gpuutil.profile(job_id="")


def test_the_override_names_each_cuda_device_and_refuses_what_is_not_a_uuid(monkeypatch):
    assert identity.parse_override("GPU-AbC1, mig-9f") == {0: "GPU-abc1", 1: "MIG-9f"}
    assert identity.parse_override({3: "GPU-x"}) == {3: "GPU-x"}
    with pytest.raises(ValueError, match="not a GPU-"):
        identity.parse_override(["0"])
    monkeypatch.setenv("GPUUTIL_GPU_UUIDS", "GPU-a,nope")
    with pytest.raises(ValueError, match="GPUUTIL_GPU_UUIDS"):
        ReportTotals()
    monkeypatch.setenv("GPUUTIL_GPU_UUIDS", "GPU-a,GPU-b")
    m = ReportTotals(host="h", job_id="j")
    m.add(_step(device=1))
    assert _series(m)["gpuutil_time_seconds_total"][0][0]["UUID"] == "GPU-b"


def test_torch_uuids_get_nvmls_gpu_prefix_without_nvml(monkeypatch):
    monkeypatch.setenv("GPUUTIL_NVML_LIBRARY", "/nonexistent/libnvidia-ml.so.1")
    torch = torch_like(["8932f937-d72c-4106-c12f-20bd9faed9f6", "1111aaaa-0000-0000-0000-000000000000"],
                       contexts=(1,))
    names = identity.gpu_names([0, 1], environ={}, torch=torch)
    assert names == {0: identity.GpuName("GPU-8932f937-d72c-4106-c12f-20bd9faed9f6"),
                     1: identity.GpuName("GPU-1111aaaa-0000-0000-0000-000000000000")}
    assert identity.gpu_names([0], environ={}, torch=torch_like([], initialised=False)) == {}


def test_nvml_spells_the_uuid_and_names_a_mig_instance_with_its_parent(monkeypatch):
    if not FAKE.is_file():
        pytest.skip(f"{FAKE} not built (scripts/test.sh builds the C++ tests)")
    monkeypatch.setenv("GPUUTIL_NVML_LIBRARY", str(FAKE))
    monkeypatch.setenv("FAKE_NVML_SCENARIO", "ok")
    monkeypatch.setenv("FAKE_NVML_MIG", "1")
    import ctypes

    gpu0 = fake_uuid(0)
    lib = ctypes.CDLL(str(FAKE))
    lib.fake_nvml_mig_uuid.restype = ctypes.c_char_p
    mig = lib.fake_nvml_mig_uuid(1).decode()
    # torch prints GPU 0's UUID bare and upper-case; CUDA_VISIBLE_DEVICES names the MIG instance
    names = identity.gpu_names([0], environ={}, torch=torch_like([gpu0[4:].upper()]))
    assert names == {0: identity.GpuName(gpu0)}
    names = identity.gpu_names([0], environ={"CUDA_VISIBLE_DEVICES": mig})
    assert names == {0: identity.GpuName(mig, fake_uuid(1))}


def test_series_carry_job_id_and_uuid_and_never_job():
    m = ReportTotals(host="node-1", job_id="train-7", gpu_uuids=["GPU-aa"])
    m.add(_step())
    fams = m.families()
    assert fams and all("job" not in labels for _, _, _, samples in fams for labels, _ in samples)
    assert all(labels["job_id"] == "train-7" for _, _, _, samples in fams for labels, _ in samples)
    buckets = _series(m)["gpuutil_time_seconds_total"]
    assert {tuple(sorted(labels)) for labels, _ in buckets} == {
        ("UUID", "bucket", "device", "host", "job_id", "rank")}
    # one series per GPU per job per bucket: folding more steps adds no series
    m.add(_step())
    assert len(_series(m)["gpuutil_time_seconds_total"]) == len(buckets)


def test_flops_peak_and_user_units_are_counters_and_gauges():
    m = ReportTotals(host="h", job_id="j", gpu_uuids=["GPU-aa"])
    m.add(_step(flops=5e9))
    m.add(_step(flops=5e9))
    m.count(samples=32, tokens=4096, useful_steps=1, rank=0)
    m.count(samples=32, tokens=4096, rank=0)
    s = _series(m)
    assert s["gpuutil_flops_total"][0][1] == 1e10
    assert s["gpuutil_peak_flops"][0][1] == 1e15
    assert s["gpuutil_samples_total"] == [({"job_id": "j", "rank": "0", "host": "h"}, 64.0)]
    assert s["gpuutil_tokens_total"][0][1] == 8192 and s["gpuutil_useful_steps_total"][0][1] == 1
    with pytest.raises(ValueError):
        m.count(samples=-1)


def test_gpu_info_and_attached_seconds_exist_while_a_profile_runs_and_take_its_job_id():
    metrics = ReportTotals(host="h", gpu_uuids=["GPU-aa"])
    metrics.add(_step())  # before any profile: no GPU is attached
    assert "gpuutil_gpu_info" not in _series(metrics)
    assert "gpuutil_gpu_attached_seconds_total" not in _series(metrics)
    with gpuutil.profile(job_id="exp-42", on_step=metrics, report_interval_ms=0) as prof:
        assert prof.job_id == "exp-42"
        metrics.add(_step())
        time.sleep(0.05)
        s = _series(metrics)
        (info,) = s["gpuutil_gpu_info"]
        assert info == ({"job_id": "exp-42", "rank": "0", "host": "h", "device": "0", "UUID": "GPU-aa",
                         "parent_UUID": ""}, 1.0)
        attached = s["gpuutil_gpu_attached_seconds_total"][0][1]
        assert attached >= 0.05
    s = _series(metrics)
    assert "gpuutil_gpu_info" not in s  # stopped: no longer attached
    frozen = s["gpuutil_gpu_attached_seconds_total"][0][1]
    time.sleep(0.02)
    assert _series(metrics)["gpuutil_gpu_attached_seconds_total"][0][1] == frozen >= attached

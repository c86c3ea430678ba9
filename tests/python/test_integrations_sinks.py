"""Each tracker sink logs the flat per-step metrics, checked by reading back
what it wrote, offline: a wandb offline run, a temporary MLflow file store,
TensorBoard event files."""

from __future__ import annotations

import time

import pytest

torch = pytest.importorskip("torch")

import gpuutil  # noqa: E402
from gpuutil.integrations import flat_metrics  # noqa: E402

pytestmark = [
    pytest.mark.filterwarnings("ignore::FutureWarning"),
    pytest.mark.filterwarnings("ignore::DeprecationWarning"),
    pytest.mark.filterwarnings("ignore::UserWarning"),
]


class Slow(torch.utils.data.Dataset):
    def __len__(self):
        return 3

    def __getitem__(self, i):
        time.sleep(0.01)
        return torch.randn(4), torch.randn(1)


def run_three_steps(sink):
    model = torch.nn.Linear(4, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    with gpuutil.profile(on_step=sink) as prof:
        for x, y in torch.utils.data.DataLoader(Slow(), batch_size=1):
            loss = torch.nn.functional.mse_loss(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
    return list(prof.reports)


def test_flat_metrics_has_host_breakdown_keys_summing_to_100_pct():
    reports = run_three_steps(None)
    m = flat_metrics(reports[0])
    assert m["gpuutil/host_dataloader_ms"] >= 9.0
    pct = sum(v for k, v in m.items() if k.startswith("gpuutil/host_") and k.endswith("_pct"))
    assert pct == pytest.approx(100.0)
    assert all(isinstance(v, float) for v in m.values())


def test_flat_metrics_of_a_device_report_has_idle_pct_and_mfu():
    report = {"steps": [{"step": 3, "wall_ns": 1000, "host": [], "devices": [
        {"wall_ns": 1000, "mfu": 0.25, "breakdown_ns": {
            "compute": 600, "communication": 0, "memory": 100, "idle_dataloader": 300, "idle_host_sync": 0,
            "idle_collective": 0, "idle_launch": 0, "idle_host": 0, "idle_unattributed": 0}}]}]}
    m = flat_metrics(report)
    assert m["gpuutil/idle_dataloader_pct"] == pytest.approx(30.0)
    assert m["gpuutil/busy_pct"] == pytest.approx(70.0)
    assert m["gpuutil/mfu"] == pytest.approx(0.25)
    assert "gpuutil/hfu" not in m  # no hardware FLOPs given


def test_flat_metrics_carry_hfu_when_hardware_flops_are_known():
    device = {"wall_ns": 1000, "mfu": 0.6, "hfu": 0.8, "breakdown_ns": {
        "compute": 1000, "communication": 0, "memory": 0, "idle_dataloader": 0, "idle_host_sync": 0,
        "idle_collective": 0, "idle_launch": 0, "idle_host": 0, "idle_unattributed": 0}}
    m = flat_metrics({"steps": [{"step": 0, "wall_ns": 1000, "host": [], "devices": [device]}]})
    assert m["gpuutil/mfu"] == pytest.approx(0.6)
    assert m["gpuutil/hfu"] == pytest.approx(0.8)


def test_tensorboard_sink_writes_hierarchical_scalars(tmp_path):
    pytest.importorskip("tensorboard")
    from torch.utils.tensorboard import SummaryWriter
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    from gpuutil.integrations.sinks import TensorBoardSink

    writer = SummaryWriter(log_dir=str(tmp_path))
    reports = run_three_steps(TensorBoardSink(writer))
    writer.close()
    acc = EventAccumulator(str(tmp_path))
    acc.Reload()
    tags = acc.Tags()["scalars"]
    assert "gpuutil/host_dataloader_ms" in tags
    events = acc.Scalars("gpuutil/host_dataloader_ms")
    assert [e.step for e in events] == [r["steps"][0]["step"] for r in reports]
    assert events[0].value == pytest.approx(flat_metrics(reports[0])["gpuutil/host_dataloader_ms"], rel=1e-5)


def test_mlflow_sink_logs_metrics_to_a_file_store(tmp_path, monkeypatch):
    mlflow = pytest.importorskip("mlflow")
    from gpuutil.integrations.sinks import MLflowSink

    # A temporary file store (MLflow keeps it behind an opt-in flag).
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")
    mlflow.set_tracking_uri((tmp_path / "mlruns").as_uri())
    with mlflow.start_run() as run:
        reports = run_three_steps(MLflowSink())
    client = mlflow.tracking.MlflowClient()
    history = client.get_metric_history(run.info.run_id, "gpuutil/host_dataloader_ms")
    assert sorted(m.step for m in history) == [r["steps"][0]["step"] for r in reports]
    assert history[0].value >= 9.0


def test_wandb_sink_logs_to_an_offline_run(tmp_path, monkeypatch):
    wandb = pytest.importorskip("wandb")
    from gpuutil.integrations.sinks import WandbSink

    monkeypatch.setenv("WANDB_SILENT", "true")
    run = wandb.init(mode="offline", dir=str(tmp_path), project="gpuutil-test")
    try:
        for i in range(5):  # the script's own logging moves W&B's step ahead of gpuutil's
            run.log({"loss": 1.0 / (i + 1)})
        reports = run_three_steps(WandbSink(run))
    finally:
        run.finish()
    # Read back the offline run's history from its .wandb file.
    from wandb.proto import wandb_internal_pb2

    files = list(tmp_path.rglob("*.wandb"))
    assert len(files) == 1
    # wandb's service may still be writing after finish() returns: read until
    # the run's exit record is in the file.
    deadline = time.monotonic() + 30
    while True:
        rows, kinds = [], []
        for data in _wandb_log_records(files[0].read_bytes()):
            rec = wandb_internal_pb2.Record()
            rec.ParseFromString(data)
            kinds.append(rec.WhichOneof("record_type"))
            if kinds[-1] == "history":
                rows.append({item.key or "/".join(item.nested_key): item.value_json for item in rec.history.item})
        if "exit" in kinds or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    logged = [r for r in rows if "gpuutil/host_dataloader_ms" in r]
    # No row dropped although W&B's own step (5) was ahead of gpuutil's (0..2):
    # the sink never passes step=; gpuutil's step is the gpuutil/step metric.
    assert len(logged) == len(reports), (kinds, rows)
    assert [int(float(r["gpuutil/step"])) for r in logged] == [r["steps"][0]["step"] for r in reports]
    assert float(logged[0]["gpuutil/host_dataloader_ms"]) >= 9.0


def _wandb_log_records(buf: bytes):
    """Records of a .wandb file: a 7-byte ':W&B' header, then LevelDB-log
    framing (32 KiB blocks; 7-byte record headers: crc32, length, type)."""
    import struct

    assert buf[:4] == b":W&B"
    pos, block, pending = 7, 32768, b""
    while pos + 7 <= len(buf):
        left = block - pos % block
        if left < 7:
            pos += left
            continue
        _crc, length, kind = struct.unpack("<IHB", buf[pos:pos + 7])
        if kind == 0 and length == 0:
            pos += left  # zero padding to the block end
            continue
        data = buf[pos + 7:pos + 7 + length]
        pos += 7 + length
        if kind == 1:
            yield data
        elif kind == 2:
            pending = data
        elif kind == 3:
            pending += data
        elif kind == 4:
            yield pending + data
            pending = b""

"""The cross-rank view reaches every output: the ``gpuutil analyze`` table,
the HTML report, the Prometheus exposition, the flat tracker metrics and
the sinks' ``on_cluster``; a single-rank report's outputs have none of it.

tests/python/data/cluster_record.json is a ``gpuutil.cluster/1`` record as
the leader of a live 4-rank job wrote it (CPU, gloo; rank 2 slowed in its
DataLoader, so it is the straggler, cause "dataloader"), its per-step detail
trimmed to the last two steps. The offline two-rank report comes from the
shared real traces (skipped without ../shared/traces).
"""

from __future__ import annotations

import copy
import json
import re
import sys
import types
from pathlib import Path
from typing import Any, Dict, List

import pytest

from gpuutil._table import render_report
from gpuutil.export import html as html_export
from gpuutil.export import prometheus
from gpuutil.integrations.metrics import cluster_metrics, cluster_step, flat_metrics
from gpuutil.integrations.sinks import MLflowSink, StepHooks, TensorBoardSink, WandbSink

RECORD_PATH = Path(__file__).parent / "data" / "cluster_record.json"
RANK_TRACES = ("hta_sampled_rank0.json.gz", "hta_sampled_rank1.json.gz")


@pytest.fixture()
def record() -> Dict[str, Any]:
    return json.loads(RECORD_PATH.read_text())


def _finding(fid: str, recoverable_ns: int) -> Dict[str, Any]:
    return {"id": fid, "title": f"{fid} title", "evidence": f"{fid} evidence", "fix": f"{fid} fix",
            "recoverable_ns": recoverable_ns, "share_of_wall": 0.1}


def _report(record: Dict[str, Any], findings: List[Dict[str, Any]] = None) -> Dict[str, Any]:
    """A gpuutil.report/1 dict (no steps) whose summary carries the record's view."""
    findings = list(record["findings"]) if findings is None else findings
    findings.sort(key=lambda f: -f["recoverable_ns"])
    summary = {"steps": 0, "steps_wall_ns": 0, "trace_span_ns": 1_000_000_000, "outside_steps_ns": 0,
               "step_wall_p50_ns": None, "devices": [], "ranks": copy.deepcopy(record["ranks"]),
               "cluster": copy.deepcopy(record["cluster"]), "top_finding": findings[0] if findings else None}
    return {"schema": "gpuutil.report/1", "sources": [], "steps": [], "summary": summary,
            "findings": findings, "diagnostics": []}


def _single_rank(report: Dict[str, Any]) -> Dict[str, Any]:
    rep = copy.deepcopy(report)
    del rep["summary"]["ranks"], rep["summary"]["cluster"]
    rep["findings"] = [f for f in rep["findings"] if f["id"] != "straggler"]
    rep["summary"]["top_finding"] = rep["findings"][0] if rep["findings"] else None
    return rep


def _step_report(step: int = 5) -> Dict[str, Any]:
    """A one-step, one-device report as gpuutil.profile(on_step=...) gets it."""
    breakdown = {"compute": 600, "communication": 0, "memory": 100, "idle_dataloader": 300, "idle_host_sync": 0,
                 "idle_collective": 0, "idle_launch": 0, "idle_host": 0, "idle_dependency": 0,
                 "idle_unattributed": 0}
    dev = {"rank": 0, "device": 0, "wall_ns": 1000, "busy_ns": 700, "kernels": 3, "breakdown_ns": breakdown}
    return {"schema": "gpuutil.report/1", "steps": [{"step": step, "wall_ns": 1000, "host": [], "devices": [dev]}],
            "findings": []}


@pytest.fixture(scope="module")
def offline_report(trace, installed_gpuutil):
    return installed_gpuutil.analyze([str(trace(n)) for n in RANK_TRACES])


# -- the analyze table -----------------------------------------------------------------------------------


def _rank_row(text: str, rank: int) -> str:
    rows = [line for line in text.splitlines() if re.match(rf"^\s+{rank}\s+\S", line)]
    assert len(rows) == 1, text
    return rows[0]


def test_table_has_a_row_per_rank_with_the_straggler_marked(record):
    text = render_report(_report(record))
    assert "Ranks: world size 4, 20 steps compared, 22 collectives matched, straggler threshold 2.464 ms, " \
           "times from host timelines" in text
    header = next(line for line in text.splitlines() if line.lstrip().startswith("rank  host"))
    for col in ("steps", "step wall p50 ms", "own p50 ms", "coll wait p50 ms", "transfer total ms", "rel perf",
                "start skew p50 ms", "note"):
        assert col in header
    row2 = _rank_row(text, 2).split()
    assert row2[:8] == ["2", "vm", "20", "50.130", "50.130", "0.000", "127.276", "0.203"]
    assert row2[-2:] == ["straggler", "(dataloader)"]
    row0 = _rank_row(text, 0).split()
    assert row0 == ["0", "vm", "20", "49.209", "10.758", "39.666", "127.276", "0.944", "0.067"]
    assert "Top finding: Rank 2 (vm) is a straggler" in text


def test_table_shows_the_straggler_rank_host_and_cause_among_other_findings(record):
    text = render_report(_report(record, [_finding("idle_host", 10**10)] + record["findings"]))
    others = text[text.index("Other findings:"):]
    assert "2. Rank 2 (vm) is a straggler" in others
    assert "   rank 2 (vm), cause: dataloader" in others
    assert "evidence: own time (step wall minus collective wait)" in others


def test_table_names_missing_and_short_ranks_and_what_could_not_be_matched(record):
    rec = copy.deepcopy(record)
    rec["ranks"] = [r for r in rec["ranks"] if r["rank"] != 3]
    rec["cluster"].update(missing_ranks=[3], short_ranks=[1], collective_mismatches=2)
    text = render_report(_report(rec))
    assert "missing ranks (no steps received): 3; short ranks (fewer steps than the others): 1" in text
    assert "2 collective mismatches" in text
    assert not re.search(r"^\s+3\s+vm", text, re.M)


def test_single_rank_table_has_no_ranks_section(record):
    report = _report(record, [_finding("idle_host", 10**10), _finding("idle_launch", 10**9)])
    text = render_report(_single_rank(report))
    assert "Ranks" not in text and "straggler" not in text
    assert "2. idle_launch title" in text


def test_offline_two_rank_table_lists_each_trace_as_a_rank(offline_report):
    text = render_report(offline_report)
    section = text[text.index("Ranks: world size 2"):]
    assert "times from device timelines" in section.splitlines()[0]
    assert "hta_sampled_rank0.json.gz" in _rank_row(section, 0)
    assert "hta_sampled_rank1.json.gz" in _rank_row(section, 1)
    assert "start skew" not in section  # clocks of offline traces are not aligned: no skew column


def test_offline_single_trace_table_has_no_ranks_section(trace, installed_gpuutil):
    text = render_report(installed_gpuutil.analyze(str(trace(RANK_TRACES[0]))))
    assert "Ranks" not in text


# -- HTML --------------------------------------------------------------------------------------------------


def test_html_has_a_ranks_table_with_the_straggler_row(record):
    page = html_export.render_html([_report(record)])
    assert "<h2>Ranks</h2>" in page and '<table class="ranks">' in page
    rows = re.findall(r"<tr[^>]*>(.*?)</tr>", page[page.index('<table class="ranks">'):])
    assert len(rows) == 5  # header + 4 ranks
    straggler = re.search(r'<tr class="straggler">(.*?)</tr>', page).group(1)
    assert re.findall(r"<td>(.*?)</td>", straggler)[:3] == ["2", "vm", "20"]
    assert "straggler (dataloader)" in straggler
    assert "Rank 2 (vm), cause: dataloader" in page  # in the findings list


def test_html_takes_the_view_and_findings_of_a_live_record_among_step_reports(record):
    page = html_export.render_html([_step_report(1), record, _step_report(2)])
    assert "<h2>Ranks</h2>" in page
    assert page.count("Rank 2 (vm) is a straggler") == 2  # the top finding line and the findings list
    assert "rank 0 device 0: 2 steps" in page


def test_html_of_a_single_rank_report_has_no_ranks_section(record):
    page = html_export.render_html([_single_rank(_report(record, [_finding("idle_host", 10**9)]))])
    assert "Ranks" not in page and "class=\"ranks\"" not in page and ".ranks" not in page


def test_html_of_the_offline_two_rank_report_has_the_ranks_table(offline_report):
    page = html_export.render_html([offline_report])
    assert "<h2>Ranks</h2>" in page
    assert "<td>hta_sampled_rank1.json.gz</td>" in page


# -- Prometheus ---------------------------------------------------------------------------------------------


@pytest.fixture()
def parser():
    return pytest.importorskip("prometheus_client.parser",
                               reason="prometheus_client not installed (requirements-dev.txt)")


def _samples(parser, text: str) -> Dict[str, list]:
    out: Dict[str, list] = {}
    for fam in parser.text_string_to_metric_families(text):
        for s in fam.samples:
            out.setdefault(s.name, []).append(s)
    return out


def test_prometheus_has_per_rank_series_from_a_live_record(parser, record):
    metrics = prometheus.PrometheusMetrics(host="leader")
    metrics.add(record)
    samples = _samples(parser, metrics.exposition())
    perf = {s.labels["rank"]: s for s in samples["gpuutil_rank_relative_perf"]}
    assert sorted(perf) == ["0", "1", "2", "3"]
    assert all(s.labels["host"] == "vm" for s in perf.values())
    assert perf["2"].value == pytest.approx(0.20260244998660484)
    wall = {s.labels["rank"]: s.value for s in samples["gpuutil_rank_step_wall_p50_seconds"]}
    assert wall["0"] == pytest.approx(0.049208616)
    own = {s.labels["rank"]: s.value for s in samples["gpuutil_rank_own_p50_seconds"]}
    assert own["2"] == pytest.approx(0.05013007)
    wait = {s.labels["rank"]: s.value for s in samples["gpuutil_rank_collective_wait_seconds_total"]}
    assert wait["0"] == pytest.approx(0.796527659)
    p50 = {s.labels["rank"]: s.value for s in samples["gpuutil_rank_collective_wait_p50_seconds"]}
    assert p50["2"] == 0.0
    skew = {s.labels["rank"]: s.value for s in samples["gpuutil_rank_start_skew_p50_seconds"]}
    assert skew["3"] == pytest.approx(0.009562648)
    (straggler,) = samples["gpuutil_straggler"]
    job = {"job_id": metrics.job_id}  # every series carries the job (docs/fleet.md)
    assert straggler.labels == {**job, "rank": "2", "host": "vm", "cause": "dataloader"} and straggler.value == 1.0
    (world,) = samples["gpuutil_cluster_world_size"]
    assert world.labels == {**job, "rank": "0", "host": "leader"} and world.value == 4.0
    assert samples["gpuutil_cluster_missing_ranks"][0].value == 0.0
    assert "gpuutil_steps_total" not in samples  # a record is no step report


def test_prometheus_keeps_the_latest_view_only(parser, record):
    metrics = prometheus.PrometheusMetrics(host="h")
    metrics.on_cluster(record)
    later = copy.deepcopy(record)
    later["findings"] = []
    later["cluster"]["missing_ranks"] = [3]
    later["ranks"] = later["ranks"][:3]
    metrics.on_cluster(later)
    samples = _samples(parser, metrics.exposition())
    assert "gpuutil_straggler" not in samples
    assert sorted(s.labels["rank"] for s in samples["gpuutil_rank_relative_perf"]) == ["0", "1", "2"]
    assert samples["gpuutil_cluster_missing_ranks"][0].value == 1.0


def test_prometheus_as_on_step_gets_step_reports_and_cluster_records(parser, record):
    metrics = prometheus.PrometheusMetrics(host="h")
    hook = getattr(metrics, "on_cluster")  # what the live profile looks up on its on_step
    metrics(_step_report(1))
    hook(record)
    metrics(_step_report(2))
    samples = _samples(parser, metrics.exposition())
    assert samples["gpuutil_steps_total"][0].value == 2.0
    assert len(samples["gpuutil_rank_relative_perf"]) == 4


def test_prometheus_rank_host_labels_are_escaped(parser, record):
    rec = copy.deepcopy(record)
    rec["ranks"][1]["host"] = 'node "b"\\x\n'
    samples = _samples(parser, prometheus.PrometheusMetrics(host="h").add_all([rec]).exposition())
    hosts = {s.labels["rank"]: s.labels["host"] for s in samples["gpuutil_rank_relative_perf"]}
    assert hosts["1"] == 'node "b"\\x\n'


def test_prometheus_of_a_single_rank_report_has_no_rank_series(parser):
    text = prometheus.PrometheusMetrics(host="h").add_all([_step_report()]).exposition()
    assert "gpuutil_rank_" not in text and "gpuutil_straggler" not in text and "gpuutil_cluster_" not in text
    assert "gpuutil_steps_total" in _samples(parser, text)


def test_prometheus_of_the_offline_two_rank_report(parser, offline_report):
    samples = _samples(parser, prometheus.PrometheusMetrics(host="h").add_all([offline_report]).exposition())
    hosts = {s.labels["rank"]: s.labels["host"] for s in samples["gpuutil_rank_own_p50_seconds"]}
    assert hosts == {"0": "hta_sampled_rank0.json.gz", "1": "hta_sampled_rank1.json.gz"}
    assert "gpuutil_rank_start_skew_p50_seconds" not in samples  # unknown offline: left out, never NaN
    assert len(samples["gpuutil_step_wall_seconds_total"]) == 2  # the per-device series are still there


# -- flat tracker metrics --------------------------------------------------------------------------------


def test_cluster_metrics_flatten_each_rank_and_name_the_straggler(record):
    m = cluster_metrics(record)
    assert m["gpuutil/cluster/rank2/relative_perf"] == pytest.approx(0.20260244998660484)
    assert m["gpuutil/cluster/rank2/collective_wait_p50_ms"] == 0.0
    assert m["gpuutil/cluster/rank0/collective_wait_p50_ms"] == pytest.approx(39.665772)
    assert m["gpuutil/cluster/rank0/step_wall_p50_ms"] == pytest.approx(49.208616)
    assert m["gpuutil/cluster/rank2/own_p50_ms"] == pytest.approx(50.13007)
    assert m["gpuutil/cluster/rank3/start_skew_p50_ms"] == pytest.approx(9.562648)
    assert m["gpuutil/cluster/rank1/collective_wait_ms"] == pytest.approx(773.900372)
    assert m["gpuutil/cluster/rank1/steps"] == 20.0
    assert m["gpuutil/cluster/straggler_rank"] == 2.0
    assert m["gpuutil/cluster/world_size"] == 4.0
    assert m["gpuutil/cluster/missing_ranks"] == 0.0
    assert m["gpuutil/cluster/short_ranks"] == 0.0
    assert m["gpuutil/cluster/lost_ranks"] == 0.0
    assert all(isinstance(v, float) for v in m.values())
    assert {k.split("/")[2] for k in m if k.startswith("gpuutil/cluster/rank")} == {"rank0", "rank1", "rank2",
                                                                                      "rank3"}


def test_cluster_metrics_are_the_same_from_a_record_a_report_and_a_summary(record):
    summary = {"steps": 20, "devices": [], "findings": record["findings"], "ranks": record["ranks"],
               "cluster": record["cluster"]}  # prof.summary() on the leader
    assert cluster_metrics(_report(record)) == cluster_metrics(record) == cluster_metrics(summary)


def test_cluster_metrics_without_straggler_or_clock_alignment(record):
    rec = copy.deepcopy(record)
    rec["findings"] = []
    rec["cluster"]["missing_ranks"] = [4, 5]
    for r in rec["ranks"]:
        r["start_skew_p50_ns"] = None
    m = cluster_metrics(rec)
    assert m["gpuutil/cluster/straggler_rank"] == -1.0
    assert m["gpuutil/cluster/missing_ranks"] == 2.0
    assert not any(k.endswith("start_skew_p50_ms") for k in m)


def test_cluster_metrics_of_a_step_report_are_empty():
    assert cluster_metrics(_step_report()) == {}
    assert flat_metrics(_step_report())  # the step's own metrics are unaffected


def test_cluster_step_is_the_latest_compared_step(record):
    assert cluster_step(record) == 19
    rec = copy.deepcopy(record)
    rec["cluster"]["recent_steps"] = []
    assert cluster_step(rec) == 19  # the ranks' last_step


# -- sinks' on_cluster -------------------------------------------------------------------------------------


class FakeWandbRun:
    def __init__(self) -> None:
        self.calls: List[Dict[str, Any]] = []

    def log(self, data: Dict[str, Any], step: int = None, commit: bool = None) -> None:
        self.calls.append({"data": dict(data), "step": step, "commit": commit})


class FakeWriter:
    def __init__(self) -> None:
        self.scalars: List[tuple] = []

    def add_scalar(self, tag: str, value: float, step: int) -> None:
        self.scalars.append((tag, value, step))


def test_wandb_on_cluster_joins_the_open_step_without_a_step_of_its_own(record):
    run = FakeWandbRun()
    sink = WandbSink(run)
    sink(_step_report(19))
    sink.on_cluster(record)
    assert run.calls[0]["step"] is None and run.calls[0]["data"]["gpuutil/step"] == 19
    assert run.calls[1] == {"data": cluster_metrics(record), "step": None, "commit": False}


def test_mlflow_on_cluster_logs_at_the_latest_compared_step(record, monkeypatch):
    logged = []
    fake = types.SimpleNamespace(log_metrics=lambda metrics, step=None: logged.append((dict(metrics), step)))
    monkeypatch.setitem(sys.modules, "mlflow", fake)
    MLflowSink().on_cluster(record)
    assert logged == [(cluster_metrics(record), 19)]


def test_mlflow_client_on_cluster_logs_a_batch(record):
    pytest.importorskip("mlflow")

    class FakeClient:
        def __init__(self) -> None:
            self.batches = []

        def log_batch(self, run_id, metrics):
            self.batches.append((run_id, metrics))

    client = FakeClient()
    MLflowSink(client=client, run_id="run-1").on_cluster(record)
    ((run_id, metrics),) = client.batches
    assert run_id == "run-1"
    assert {m.key: m.value for m in metrics} == cluster_metrics(record)
    assert {m.step for m in metrics} == {19}


def test_tensorboard_on_cluster_writes_scalars_at_the_latest_compared_step(record):
    writer = FakeWriter()
    TensorBoardSink(writer).on_cluster(record)
    assert {tag: value for tag, value, _ in writer.scalars} == cluster_metrics(record)
    assert {step for _, _, step in writer.scalars} == {19}


def test_sinks_log_nothing_for_a_record_without_a_view():
    run, writer = FakeWandbRun(), FakeWriter()
    WandbSink(run).on_cluster({"schema": "gpuutil.cluster/1", "rank": 0})
    TensorBoardSink(writer).on_cluster({"schema": "gpuutil.cluster/1", "rank": 0})
    assert run.calls == [] and writer.scalars == []


def test_step_hooks_expose_on_cluster_to_the_profile(record):
    steps, records = [], []
    hooks = StepHooks(steps.append, records.append)
    hooks(_step_report())
    getattr(hooks, "on_cluster")(record)
    assert len(steps) == 1 and records == [record]


class _FakeProfile:
    """Stands in for gpuutil.profile(): keeps the on_step it was given."""

    def __init__(self, *args: Any, on_step: Any = None, **kwargs: Any) -> None:
        self.on_step = on_step

    def start(self) -> "_FakeProfile":
        return self


class _FakeLogger:
    def __init__(self) -> None:
        self.logged: List[tuple] = []

    def log_metrics(self, metrics: Dict[str, float], step: int = None) -> None:
        self.logged.append((dict(metrics), step))


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
@pytest.mark.filterwarnings("ignore::FutureWarning")
@pytest.mark.filterwarnings("ignore::UserWarning")
def test_lightning_callback_forwards_cluster_records_to_sinks_and_loggers(record, monkeypatch):
    pytest.importorskip("lightning.pytorch")
    import gpuutil
    from gpuutil.integrations.lightning import GpuutilCallback

    monkeypatch.setattr(gpuutil, "profile", _FakeProfile)
    writer, logger = FakeWriter(), _FakeLogger()
    cb = GpuutilCallback(sinks=[TensorBoardSink(writer)])
    cb.on_train_start(types.SimpleNamespace(is_global_zero=True, loggers=[logger]), None)
    on_step = cb.prof.on_step
    on_step(_step_report(19))
    on_step.on_cluster(record)
    assert {tag for tag, _, _ in writer.scalars} >= set(cluster_metrics(record))
    assert logger.logged[-1] == (cluster_metrics(record), 19)
    assert logger.logged[0][1] == 19 and "gpuutil/step_wall_ms" in logger.logged[0][0]


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
@pytest.mark.filterwarnings("ignore::FutureWarning")
@pytest.mark.filterwarnings("ignore::UserWarning")
def test_huggingface_callback_forwards_cluster_records_to_sinks(record, monkeypatch):
    pytest.importorskip("transformers")
    import gpuutil
    from gpuutil.integrations.huggingface import GpuutilTrainerCallback

    monkeypatch.setattr(gpuutil, "profile", _FakeProfile)
    run = FakeWandbRun()
    plain: List[Dict[str, Any]] = []
    cb = GpuutilTrainerCallback(sinks=[WandbSink(run), plain.append])  # a plain callable has no on_cluster
    cb.on_train_begin(None, None, None)
    cb.prof.on_step(_step_report(3))
    cb.prof.on_step.on_cluster(record)
    assert [c["commit"] for c in run.calls] == [True, False]
    assert len(plain) == 1


def test_a_leader_jsonl_with_cluster_records_loads_in_compare_and_the_exporters(record, tmp_path):
    """A distributed job's leader writes gpuutil.cluster/1 lines between its
    step reports: compare skips them, html/prometheus use them."""
    import gpuutil
    from gpuutil import cli, compare

    with gpuutil.profile(report_interval_ms=0) as prof:
        for _ in range(2):
            with prof.step():
                pass
    lines = [json.dumps(prof.reports[0]), json.dumps(record), json.dumps(prof.reports[1])]
    path = tmp_path / "steps.rank0.jsonl"
    path.write_text("\n".join(lines) + "\n")
    assert [r["schema"] for r in compare.load_run(str(path))] == ["gpuutil.report/1"] * 2
    kept = compare.load_run(str(path), cluster_records=True)
    assert [r["schema"].split("/")[0] for r in kept] == ["gpuutil.report", "gpuutil.cluster", "gpuutil.report"]
    out = tmp_path / "m.prom"
    assert cli.main(["export", "prometheus", str(path), "-o", str(out)]) == 0
    job_id = prometheus.PrometheusMetrics().job_id  # the CLI's, from this process's environment
    assert f'gpuutil_straggler{{cause="dataloader",host="vm",job_id="{job_id}",rank="2"}} 1.0' in out.read_text()
    only_cluster = tmp_path / "cluster_only.jsonl"
    only_cluster.write_text(json.dumps(record) + "\n")
    with pytest.raises(compare.RunError, match="no gpuutil step report"):
        compare.load_run(str(only_cluster))

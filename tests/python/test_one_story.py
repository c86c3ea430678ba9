"""One story everywhere (issue 26, items 9-10): a run's findings are the
same list, in the same order, titled in words, in ``prof.summary()``,
``gpuutil.format`` of it, ``gpuutil analyze`` of the run's JSONL (table and
--json) and the HTML report of that JSONL; the HTML of a host-only run plots
the main thread's host categories per step and lists the run's findings
once; ``analyze`` of a JSONL has a per-step table and counts the steps;
no finding with 0.0% recoverable time is listed. And on every shared real
trace, ``gpuutil analyze``, ``gpuutil.format`` of the analysed report and
the HTML report lead with the same top finding."""

from __future__ import annotations

import html as html_lib
import importlib.util
import json
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Dict, List

import pytest

import gpuutil
from gpuutil.export import html as html_export

from conftest import REPO, all_traces

STEPS = 80


def _train_module():
    spec = importlib.util.spec_from_file_location("gpuutil_example_train", REPO / "examples" / "train.py")
    mod = importlib.util.module_from_spec(spec)
    assert spec.loader is not None
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="module")
def live_run(tmp_path_factory) -> Dict[str, Any]:
    """An 80-step host-only live run of examples/train.py's model and data,
    as its main() runs it, with two planted problems: a loader stall (2 ms
    per sample, 16 ms per batch) and an optimizer that sleeps as long (8 x
    2 ms, so that a loaded machine stretches both alike): two findings,
    the loader's first (all of its time is recoverable, half the
    optimizer's), so their order is tested too."""
    torch = pytest.importorskip("torch")
    train = _train_module()
    torch.set_num_threads(1)
    torch.manual_seed(0)

    class SlowSGD(torch.optim.SGD):
        def step(self, closure=None):  # noqa: D401 - an optimizer's step
            for _ in range(8):
                time.sleep(0.002)
            return super().step(closure)

    model = train.make_model(False)
    opt = SlowSGD(model.parameters(), lr=0.01)
    loader = torch.utils.data.DataLoader(train.SyntheticImages(STEPS * 8, 2.0), batch_size=8, num_workers=0)
    out = tmp_path_factory.mktemp("run") / "steps.jsonl"
    with gpuutil.profile(output=str(out)) as prof:
        for x, y in loader:
            loss = torch.nn.functional.cross_entropy(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
    summary = prof.summary()
    assert summary["steps"] == STEPS, summary["steps"]
    return {"summary": summary, "jsonl": out}


def _cli(*args: Any) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "gpuutil", *map(str, args)], capture_output=True, text=True)


def _titles(findings: List[Dict[str, Any]]) -> List[str]:
    return [f["title"] for f in findings]


def _in_order(text: str, titles: List[str]) -> bool:
    at = -1
    for t in titles:
        at = text.find(t, at + 1)
        if at < 0:
            return False
    return True


def _html_titles(page: str) -> List[str]:
    return [html_lib.unescape(t) for t in re.findall(r"<li><b>(.*?)</b>", page)]


def _html_top(page: str) -> str:
    m = re.search(r'class="top">Top finding: <b>(.*?)</b>', page)
    return html_lib.unescape(m.group(1)) if m else ""


def test_summary_format_analyze_and_html_of_a_live_run_list_the_same_findings_in_order(live_run, tmp_path):
    summary = live_run["summary"]
    titles = _titles(summary["findings"])
    ids = [f["id"] for f in summary["findings"]]
    assert ids[:2] == ["host_dataloader", "host_optimizer"], summary["findings"]

    merged = json.loads(_cli("analyze", "--json", live_run["jsonl"]).stdout)
    assert _titles(merged["findings"]) == titles
    assert [f["recoverable_ns"] for f in merged["findings"]] == [f["recoverable_ns"] for f in summary["findings"]]
    assert merged["summary"]["top_finding"]["title"] == titles[0]

    table = _cli("analyze", live_run["jsonl"])
    assert table.returncode == 0, table.stderr
    assert f"Top finding: {titles[0]}" in table.stdout
    assert _in_order(table.stdout, titles), table.stdout

    text = gpuutil.format(summary)
    assert f"Top finding: {titles[0]}" in text
    assert _in_order(text, titles), text

    page_path = tmp_path / "run.html"
    assert _cli("export", "html", live_run["jsonl"], "-o", page_path).returncode == 0
    page = page_path.read_text()
    assert _html_top(page) == titles[0]
    assert _html_titles(page) == titles  # the run's findings, once (not one entry per step)


def test_findings_are_titled_in_words_and_none_recovers_zero_point_zero_percent(live_run):
    for f in live_run["summary"]["findings"]:
        assert f["id"] not in f["title"], f["title"]
        assert not re.search(r"\bin \d+ of \d+ steps\b", f["title"]), f["title"]
        assert f["recoverable_ns"] > 0 and f["share_of_wall"] >= 0.0005, f
    top = live_run["summary"]["findings"][0]
    assert top["title"].startswith("The training thread waits for the next batch ")
    assert f"of {STEPS} steps" in top["evidence"], top["evidence"]
    table = _cli("analyze", live_run["jsonl"]).stdout
    assert "0.0% of step time recoverable" not in table and "recoverable: 0.000 ms" not in table


def test_analyze_of_a_host_only_jsonl_has_a_per_step_table_and_counts_every_step(live_run):
    out = _cli("analyze", live_run["jsonl"]).stdout
    workload = next(line for line in out.splitlines() if line.startswith("workload: "))
    assert f"{STEPS} steps from optimizer_step" in workload and "; 1 step" not in workload, workload
    assert f"Summary host, main training thread: {STEPS} steps" in out
    header = next(i for i, line in enumerate(out.splitlines()) if line.startswith("step ") and "dataloader %" in line)
    rows = [line for line in out.splitlines()[header + 2:header + 2 + STEPS] if re.match(r"\s*\d+\s", line)]
    assert len(rows) == STEPS, out
    # Each row's categories add up to its wall (shares sum to 100%).
    cells = [float(c) for c in rows[5].split()[2:]]
    assert sum(cells) == pytest.approx(100.0, abs=0.5), rows[5]


def test_the_html_of_a_host_only_run_plots_the_host_categories_per_step(live_run, tmp_path):
    page_path = tmp_path / "run.html"
    assert _cli("export", "html", live_run["jsonl"], "-o", page_path).returncode == 0
    page = page_path.read_text()
    assert page.count('class="host-breakdown"') == 1
    svg = page[page.index('class="host-breakdown"'):]
    svg = svg[:svg.index("</svg>")]
    bars = re.findall(r'fill="(#[0-9a-f]{6})"><title>step (\d+) (\w+):', svg)
    assert {int(step) for _, step, _ in bars} == set(range(STEPS))
    colors = {c for c, _, _ in bars}
    assert html_export.HOST_COLORS["dataloader"] in colors and html_export.HOST_COLORS["optimizer"] in colors
    assert f"host, main training thread: {STEPS} steps" in page


def test_time_between_steps_is_the_same_outside_steps_finding_in_the_summary_and_the_jsonl(tmp_path):
    """The JSONL's time between steps used to be a figure without a finding
    (step reports never carry outside_steps); it is the run's finding, as
    in prof.summary()."""
    out = tmp_path / "steps.jsonl"
    with gpuutil.profile(str(out), report_interval_ms=0) as prof:
        for _ in range(20):
            with prof.step():
                time.sleep(0.010)
            time.sleep(0.004)  # evaluation between steps
    summary = prof.summary()
    merged = json.loads(_cli("analyze", "--json", out).stdout)
    assert summary["findings"] and summary["findings"][0]["id"] == "outside_steps", summary["findings"]
    assert _titles(merged["findings"]) == _titles(summary["findings"])
    assert merged["summary"]["outside_steps_ns"] == summary["outside_steps_ns"]
    page = tmp_path / "r.html"
    assert _cli("export", "html", out, "-o", page).returncode == 0
    assert _html_titles(page.read_text()) == _titles(summary["findings"])


def test_a_leaders_jsonl_shows_the_cross_rank_view_and_ranks_the_straggler_among_the_runs_findings(live_run, tmp_path):
    """A distributed leader's JSONL holds cluster records between its step
    reports: `analyze` of it shows the last record's cross-rank view and its
    straggler finding ranked among the run's findings, as the leader's
    prof.summary() does and the HTML report of the file does (analyze used
    to skip the records)."""
    straggler = {"id": "straggler", "title": "Rank 2 (vm) is a straggler: 38.1 ms more own time per step than the "
                 "median rank, mostly dataloader", "evidence": "...", "fix": "more workers on that rank",
                 "recoverable_ns": 2_368_541_578, "share_of_wall": 0.56, "rank": 2, "host": "vm", "cause": "dataloader"}
    ranks = [{"rank": r, "host": "vm", "steps": 20, "step_wall_p50_ns": 50_000_000, "own_p50_ns": 11_000_000,
              "collective_wait_p50_ns": 39_000_000, "collective_transfer_ns": 120_000_000, "relative_perf": 1.0,
              "basis": "host"} for r in range(4)]
    record = {"schema": "gpuutil.cluster/1", "rank": 0, "ranks": ranks,
              "cluster": {"world_size": 4, "steps_compared": 20}, "findings": [straggler]}
    lines = live_run["jsonl"].read_text().splitlines()  # the live run's step reports, as rank 0's
    out = tmp_path / "steps.rank0.jsonl"
    out.write_text("\n".join(lines[:40] + [json.dumps(record)] + lines[40:] + [json.dumps(record)]) + "\n")
    merged = json.loads(_cli("analyze", "--json", out).stdout)
    titles = _titles(merged["findings"])
    assert titles == [straggler["title"], *_titles(live_run["summary"]["findings"])], titles
    assert merged["summary"]["ranks"] == ranks
    table = _cli("analyze", out).stdout
    assert "Ranks: world size 4" in table and "straggler (dataloader)" in table
    assert table.index("Top finding: Rank 2 (vm) is a straggler") < table.index("The training thread waits")
    page = tmp_path / "r.html"
    assert _cli("export", "html", out, "-o", page).returncode == 0
    assert _html_titles(page.read_text()) == titles


def _shared_traces() -> List[Any]:
    found = all_traces()
    if not found:
        return [pytest.param(None, marks=pytest.mark.skip(reason="the shared real traces are not at ../shared/traces "
                                                                   "(set GPUUTIL_TRACES_DIR)"))]
    return [pytest.param([p], id=p.name) for p in found] + [
        pytest.param(sorted(p for p in found if p.name.startswith("hta_sampled_rank")), id="hta_sampled_ranks")]


@pytest.mark.parametrize("paths", _shared_traces())
def test_every_shared_trace_has_one_top_finding_in_analyze_format_and_html(paths, tmp_path):
    if not paths:
        pytest.skip("no such traces")
    report = json.loads(_cli("analyze", "--json", *paths).stdout)
    table = _cli("analyze", *paths).stdout
    top = report["summary"]["top_finding"]
    page_path = tmp_path / "r.html"
    assert _cli("export", "html", *paths, "-o", page_path).returncode == 0
    page = page_path.read_text()
    text = gpuutil.format(report)
    if top is None:
        assert "No finding" in table and "No finding" in text
        assert _html_top(page) == "" and "No finding" in page
        return
    line = f"Top finding: {top['title']}"
    assert table.splitlines()[[i for i, s in enumerate(table.splitlines()) if s.startswith("Top finding")][0]] \
        .startswith(line)
    assert line in text
    assert _html_top(page) == top["title"]
    assert _html_titles(page) == _titles(report["findings"])

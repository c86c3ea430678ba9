"""Tests of the Grafana dashboard as code (scripts/gen_grafana_dashboard.py
-> deploy/grafana/gpuutil-fleet.json).

Pins: the committed JSON is what the script generates today, byte for byte
(regenerating changes nothing); it reads back through grafana-foundation-
sdk's Grafana 11.6 dashboard model with no key lost (a key the schema does
not know is dropped by the model, so it would fail here); it has the
panels the playbook asks for and the job/host/rank variables; every query
parses with promql-parser; and every query returns data in a promtool test
(the rules' own unit-test fleet, deploy/prometheus/tests, plus the
dcgm-exporter fields the pairwise panels read), so no panel is empty on
series that exist. tests/python/test_fleet_e2e.py runs the same queries on
a real server.
"""

from __future__ import annotations

import importlib.util
import json

import pytest

from conftest import REPO
from fleet_promtool import RULE_TESTS, rule_test

yaml = pytest.importorskip("yaml", reason="PyYAML not installed (requirements-dev.txt)")
pytest.importorskip("grafana_foundation_sdk", reason="grafana-foundation-sdk not installed (requirements-dev.txt)")

DASHBOARD = REPO / "deploy" / "grafana" / "gpuutil-fleet.json"
#: The template variables as Grafana fills them for "All", and the range.
SUBST = {'"$job"': '".*"', '"$host"': '".*"', '"$rank"': '".*"', "$__range": "1h"}


def _generator():
    spec = importlib.util.spec_from_file_location("gen_grafana_dashboard", REPO / "scripts" / "gen_grafana_dashboard.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _dashboard():
    return json.loads(DASHBOARD.read_text())


def _targets():
    return [(p["title"], t["expr"]) for p in _dashboard()["panels"] for t in p.get("targets", [])]


def _filled(expr: str) -> str:
    for k, v in SUBST.items():
        expr = expr.replace(k, v)
    return expr


def test_the_committed_dashboard_is_what_the_script_generates():
    assert DASHBOARD.read_text() == _generator().render()


def test_the_dashboard_reads_back_through_the_grafana_model_with_no_key_lost():
    from grafana_foundation_sdk.cog.encoder import JSONEncoder
    from grafana_foundation_sdk.cog.plugins import register_default_plugins
    from grafana_foundation_sdk.models.dashboard import Dashboard

    register_default_plugins()

    def kept(a, b, path="") -> list:
        if isinstance(a, dict):
            return [p for k, v in a.items() for p in (kept(v, b[k], f"{path}/{k}") if isinstance(b, dict) and k in b
                                                        else [f"{path}/{k}"])]
        if isinstance(a, list):
            return [f"{path}: length"] if len(a) != len(b) else [p for i, (x, y) in enumerate(zip(a, b))
                                                                  for p in kept(x, y, f"{path}[{i}]")]
        return [] if a == b else [path]

    doc = _dashboard()
    back = json.loads(json.dumps(Dashboard.from_json(doc), cls=JSONEncoder))
    assert kept(doc, back) == []
    # and a key the schema does not know is dropped, so the check above has teeth
    doc["panels"][1]["options"]["grapMode"] = "area"
    assert kept(doc, json.loads(json.dumps(Dashboard.from_json(doc), cls=JSONEncoder))) == ["/panels[1]/options/grapMode"]


def test_the_dashboard_has_the_playbook_panels_and_the_job_host_rank_variables():
    doc = _dashboard()
    titles = " | ".join(p["title"] for p in doc["panels"])
    for needed in ("GPU_UTIL vs SM_ACTIVE", "FB_USED vs SM_ACTIVE", "POWER", "GPU time by bucket", "MFU",
                   "OEE = availability x performance x quality", "GPU allocation", "Allocation heatmap",
                   "Allocation by hour of day", "Stragglers", "Cost per unit", "Allocated-but-idle GPU-hours"):
        assert needed in titles, needed
    assert [v["name"] for v in doc["templating"]["list"]] == ["datasource", "job", "host", "rank"]
    pairs = [e for t, e in _targets() if t in ("GPU_UTIL vs SM_ACTIVE", "FB_USED vs SM_ACTIVE", "POWER")]
    assert pairs and all("group_left (job_id, rank)" in e and "on (UUID)" in e for e in pairs)


def test_every_query_parses_with_promql_parser():
    promql_parser = pytest.importorskip("promql_parser", reason="promql-parser not installed (requirements-dev.txt)")
    for title, expr in _targets():
        try:
            promql_parser.parse(_filled(expr))
        except Exception as e:  # noqa: BLE001 - the parser's own error, with the panel named
            pytest.fail(f"{title}: {expr}: {e}")
    with pytest.raises(Exception):  # noqa: B017 - the parser refuses what Prometheus would
        promql_parser.parse("sum by (job_id (rate(x[5m]))")


def test_every_query_returns_data_in_a_promtool_test(tmp_path):
    fleet = yaml.safe_load((RULE_TESTS / "gpuutil-rules.test.yml").read_text())["tests"][0]["input_series"]
    extra = []
    for i, uuid in enumerate(("GPU-a0", "GPU-a1", "GPU-c", "GPU-d", "GPU-e")):
        labels = f'UUID="{uuid}",gpu="{i}",Hostname="n1"'
        extra += [{"series": f"DCGM_FI_PROF_SM_ACTIVE{{{labels}}}", "values": "0.3x80"},
                  {"series": f"DCGM_FI_DEV_FB_USED{{{labels}}}", "values": "30000x80"},
                  {"series": f"DCGM_FI_DEV_POWER_USAGE{{{labels}}}", "values": "250x80"}]
    extra.append({"series": 'gpuutil_rank_relative_perf{job_id="train-a",rank="1",host="n2"}', "values": "0.6x80"})
    # count(q) > bool 0 is 1 when q returns anything, and no sample (a failed test) when it returns nothing
    tests = [{"expr": f"count({_filled(e)}) > bool 0", "eval_time": "70m",
              "exp_samples": [{"labels": "{}", "value": 1}]} for _, e in _targets()]
    rc, out = rule_test(tmp_path, [{"interval": "1m", "input_series": fleet + extra, "promql_expr_test": tests}])
    assert rc == 0, out
    assert len(tests) == len(_targets()) >= 20

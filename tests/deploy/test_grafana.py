"""The Grafana dashboard and provisioning files are well formed, and every PromQL
expression in them parses (checked by promtool, Prometheus' own parser: each expression,
with its template variables substituted, becomes a recording rule of a temp rules file).

`dashboard_queries` and `substitute` are also used by test_prometheus_e2e.py, which runs
the same expressions against a real Prometheus."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from conftest import require_tool

pytestmark = pytest.mark.slow  # starts a process or a server

ROOT = Path(__file__).resolve().parents[2]
GRAFANA = ROOT / "deploy" / "grafana"
DASHBOARD = GRAFANA / "dashboards" / "tracepass.json"
PROVISIONING = GRAFANA / "provisioning"
COMPOSE = ROOT / "deploy" / "compose" / "docker-compose.yaml"

# Grafana 12 writes schemaVersion 41 (deploy/compose runs grafana/grafana:12.2).
SCHEMA_VERSION = 41
VARIABLES = {"datasource", "agent_name", "agent_version", "reference_set", "k", "window"}
# Values that make every expression a valid query: the template variables of the
# dashboard plus Grafana's built-in interval variables.
DEFAULT_VALUES = {
    "agent_name": "travel-assistant",
    "agent_version": "1.0",
    "reference_set": "travel-assistant",
    "k": "3",
    "window": "1h",
    "smoothing": "15m",
    "__rate_interval": "1m",
    "__interval": "15s",
    "__range": "6h",
}


def load_dashboard() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(DASHBOARD.read_text(encoding="utf-8"))
    return data


def all_panels(dashboard: dict[str, Any]) -> list[dict[str, Any]]:
    out = []
    for p in dashboard["panels"]:
        out.append(p)
        out.extend(p.get("panels", []))  # collapsed rows hold their panels
    return out


def dashboard_queries(dashboard: dict[str, Any]) -> list[tuple[str, list[str]]]:
    """(panel title, [PromQL expr of each target]) of every non-row panel."""
    return [
        (p["title"], [t["expr"] for t in p["targets"]])
        for p in all_panels(dashboard)
        if p["type"] != "row"
    ]


def substitute(expr: str, values: dict[str, str]) -> str:
    """Replace `$name` and `${name}` the way Grafana does for single values; unknown
    variables raise, so a typo in the dashboard is caught."""

    def repl(m: re.Match[str]) -> str:
        name = m.group(1) or m.group(2)
        if name not in values:
            raise KeyError(f"unknown template variable ${name} in {expr!r}")
        return values[name]

    return re.sub(r"\$\{(\w+)\}|\$(\w+)", repl, expr)


def promtool_check_exprs(exprs: list[str], tmp_path: Path) -> None:
    rules = {
        "groups": [
            {
                "name": "exprs",
                "rules": [{"record": f"check:expr_{i}", "expr": e} for i, e in enumerate(exprs)],
            }
        ]
    }
    path = tmp_path / "exprs.rules.yaml"
    path.write_text(yaml.safe_dump(rules, width=10_000), encoding="utf-8")
    proc = subprocess.run(
        [require_tool("promtool"), "check", "rules", str(path)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr + "\n" + "\n".join(exprs)


# ----------------------------------------------------------------------------- dashboard


def test_dashboard_model() -> None:
    d = load_dashboard()
    assert d["schemaVersion"] == SCHEMA_VERSION
    assert d["uid"]
    assert d["title"]
    names = {v["name"] for v in d["templating"]["list"]}
    assert names >= VARIABLES
    ds = next(v for v in d["templating"]["list"] if v["name"] == "datasource")
    assert ds["type"] == "datasource"
    assert ds["query"] == "prometheus"
    for v in d["templating"]["list"]:
        if v["type"] == "query":
            assert v["datasource"] == {"type": "prometheus", "uid": "${datasource}"}


def test_panel_ids_unique_and_grid_valid() -> None:
    panels = all_panels(load_dashboard())
    ids = [p["id"] for p in panels]
    assert len(ids) == len(set(ids))
    for p in panels:
        g = p["gridPos"]
        assert g["x"] >= 0, p["title"]
        assert g["x"] + g["w"] <= 24, p["title"]
        assert g["h"] > 0


def test_every_panel_queries_the_datasource_variable() -> None:
    for p in all_panels(load_dashboard()):
        if p["type"] == "row":
            continue
        assert p["targets"], p["title"]
        assert p["datasource"] == {"type": "prometheus", "uid": "${datasource}"}, p["title"]
        ref_ids = [t["refId"] for t in p["targets"]]
        assert len(ref_ids) == len(set(ref_ids)), p["title"]
        for t in p["targets"]:
            assert t["datasource"] == {"type": "prometheus", "uid": "${datasource}"}, p["title"]
            assert t["expr"].strip(), p["title"]


def test_required_panels_present() -> None:
    exprs = "\n".join(e for _, es in dashboard_queries(load_dashboard()) for e in es)
    for metric in (
        "tracepass_pass_at_k_upper",
        "tracepass_pass_pow_k_lower",
        "tracepass:pass_pow_k:pooled",
        "tracepass_tool_correctness_sum",
        "tracepass_trajectory_precision_sum",
        "tracepass_trajectory_recall_sum",
        "tracepass_conversations_total",
        "tracepass_spans_received_total",
        "tracepass_spans_rejected_total",
        "tracepass_open_conversations",
        "tracepass_conversations_evicted_total",
        "tracepass_evaluation_lag_seconds_bucket",
        "tracepass_policy_violations_total",
    ):
        assert metric in exprs, metric


def test_band_overrides_name_existing_series() -> None:
    """fillBelowTo must name the legend of another target of the same panel."""
    for p in all_panels(load_dashboard()):
        legends = {t.get("legendFormat") for t in p.get("targets", [])}
        for o in p.get("fieldConfig", {}).get("overrides", []):
            assert o["matcher"]["options"] in legends, (p["title"], o["matcher"])
            for prop in o["properties"]:
                if prop["id"] == "custom.fillBelowTo":
                    assert prop["value"] in legends, p["title"]


def test_dashboard_exprs_parse(tmp_path: Path) -> None:
    exprs = [
        substitute(e, DEFAULT_VALUES) for _, es in dashboard_queries(load_dashboard()) for e in es
    ]
    d = load_dashboard()
    for v in d["templating"]["list"]:
        if v["type"] == "query":
            q = substitute(v["definition"], DEFAULT_VALUES)
            m = re.fullmatch(r"label_values\((.+),\s*(\w+)\)", q)
            assert m, q
            exprs.append(m.group(1))
    promtool_check_exprs(exprs, tmp_path)


# ----------------------------------------------------------------------------- provisioning


def _yaml(path: Path) -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load(path.read_text(encoding="utf-8"))
    return data


def test_datasource_provisioning() -> None:
    doc = _yaml(PROVISIONING / "datasources" / "prometheus.yaml")
    assert doc["apiVersion"] == 1
    (ds,) = doc["datasources"]
    assert ds["type"] == "prometheus"
    assert ds["uid"]
    assert ds["url"].startswith("http://prometheus:9090")


def test_dashboard_provisioning_matches_compose_mount() -> None:
    doc = _yaml(PROVISIONING / "dashboards" / "tracepass.yaml")
    assert doc["apiVersion"] == 1
    (provider,) = doc["providers"]
    assert provider["type"] == "file"
    path = provider["options"]["path"]
    compose = _yaml(COMPOSE)
    mounts = compose["services"]["grafana"]["volumes"]
    assert f"../grafana/dashboards:{path}:ro" in mounts
    assert "../grafana/provisioning:/etc/grafana/provisioning:ro" in mounts


def test_alert_provisioning(tmp_path: Path) -> None:
    doc = _yaml(PROVISIONING / "alerting" / "tracepass.yaml")
    ds_uid = _yaml(PROVISIONING / "datasources" / "prometheus.yaml")["datasources"][0]["uid"]
    assert doc["apiVersion"] == 1
    exprs = []
    for group in doc["groups"]:
        assert {"orgId", "name", "folder", "interval", "rules"} <= set(group)
        for rule in group["rules"]:
            assert {"uid", "title", "condition", "data", "for", "noDataState"} <= set(rule)
            assert rule["noDataState"] in {"OK", "NoData", "Alerting", "KeepLast"}
            assert rule["execErrState"] in {"OK", "Error", "Alerting", "KeepLast"}
            ref_ids = [q["refId"] for q in rule["data"]]
            assert rule["condition"] in ref_ids
            for q in rule["data"]:
                assert q["model"]["refId"] == q["refId"]
                if q["datasourceUid"] == "__expr__":
                    assert q["model"]["type"] in {
                        "reduce",
                        "threshold",
                        "math",
                        "classic_conditions",
                    }
                    assert q["model"]["expression"] in ref_ids
                else:
                    assert q["datasourceUid"] == ds_uid
                    exprs.append(q["model"]["expr"])
            assert "/runbook#" in rule["annotations"]["runbook_url"]
            assert rule["labels"]["severity"]
    assert exprs
    promtool_check_exprs(exprs, tmp_path)


def test_substitute() -> None:
    values = {"datasource": "D", "k": "3", "__rate_interval": "1m"}
    assert substitute('x{k="$k", d="${datasource}"}[$__rate_interval]', values) == (
        'x{k="3", d="D"}[1m]'
    )
    with pytest.raises(KeyError):
        substitute("$nope", {})


def _panel(dashboard: dict[str, Any], title_start: str) -> dict[str, Any]:
    return next(p for p in all_panels(dashboard) if p["title"].startswith(title_start))


def test_pass_pow_k_panels_link_to_the_ui_filtered_by_agent_and_version() -> None:
    dashboard = load_dashboard()
    names = {v["name"] for v in dashboard["templating"]["list"]}
    assert "tracepass_ui" in names
    for title, version in (
        ("pass@$k vs pass^$k", "${agent_version}"),
        ("pass^$k by agent version", "${__field.labels.agent_version}"),
    ):
        links = _panel(dashboard, title)["fieldConfig"]["defaults"]["links"]
        failing = links[0]["url"]
        assert failing.startswith("${tracepass_ui}/conversations?")
        assert "agent_name=${agent_name}" in failing
        assert f"agent_version={version}" in failing
        assert "outcome=fail,error,incomplete" in failing
    assert dashboard["links"][0]["url"] == "${tracepass_ui}/"


def test_outcome_panel_shows_exemplars_linked_to_the_ui() -> None:
    panel = _panel(load_dashboard(), "Conversations by outcome")
    assert all(t["exemplar"] is True for t in panel["targets"])
    assert "tracepass_conversations_total" in panel["targets"][0]["expr"]
    (ds,) = _yaml(PROVISIONING / "datasources" / "prometheus.yaml")["datasources"]
    (dest,) = ds["jsonData"]["exemplarTraceIdDestinations"]
    assert dest["name"] == "conversation_id"  # an exemplar label tracepass writes
    assert dest["url"] == "${TRACEPASS_UI_URL}/conversations/$${__value.raw}"
    compose = _yaml(COMPOSE)
    assert compose["services"]["grafana"]["environment"]["TRACEPASS_UI_URL"].endswith("/ui")
    assert "--enable-feature=exemplar-storage" in compose["services"]["prometheus"]["command"]


def test_pass_pow_k_alert_links_to_the_failing_conversations() -> None:
    doc = _yaml(PROVISIONING / "alerting" / "tracepass.yaml")
    rules = [r for g in doc["groups"] for r in g["rules"] if "pass^" in r["title"]]
    assert rules
    url = rules[0]["annotations"]["ui_url"]
    # The base is ui.external_url, joined in as the label `url` (tracepass_ui_info).
    base = "{{ if $labels.url }}{{ $labels.url }}{{ else }}/ui{{ end }}"
    assert url.startswith(f"{base}/conversations?")
    # The runbook too: absolute on the same URL (the UI serves it at /ui/runbook).
    assert rules[0]["annotations"]["runbook_url"] == f"{base}/runbook#tracepasspasspowkbelowtarget"
    assert "tracepass_ui_info" in rules[0]["data"][0]["model"]["expr"]
    assert "agent_name={{ $labels.agent_name }}" in url
    assert "agent_version={{ $labels.agent_version }}" in url


def test_no_hard_coded_ui_host() -> None:
    """The dashboard's links and the alert's take the UI's address from ui.external_url
    (`tracepass_ui_info`), not from a host written into the files."""
    for path in (DASHBOARD, PROVISIONING / "alerting" / "tracepass.yaml"):
        text = path.read_text(encoding="utf-8")
        assert "localhost:4418" not in text, path
    ui = next(v for v in load_dashboard()["templating"]["list"] if v["name"] == "tracepass_ui")
    assert ui["definition"] == "label_values(tracepass_ui_info, url)"


# ----------------------------------------------------------------------------- layout


def grid_bands(panels: list[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    """Panels grouped by the grid line they start on (their `y`), top to bottom, each
    band sorted left to right: Grafana's grid is 24 columns wide."""
    by_y: dict[int, list[dict[str, Any]]] = {}
    for p in panels:
        by_y.setdefault(p["gridPos"]["y"], []).append(p)
    return [sorted(by_y[y], key=lambda p: p["gridPos"]["x"]) for y in sorted(by_y)]


def _layout_problems(panels: list[dict[str, Any]]) -> list[str]:
    """Every overlap of two panels' grid rectangles, and every band that is not filled
    left to right (first panel at x 0, each next one where the previous ends, the last
    ending at column 24, one height) or that leaves a vertical gap before the next."""
    problems = []
    rects = [(p["title"], p["gridPos"]) for p in panels]
    for i, (ta, a) in enumerate(rects):
        for tb, b in rects[i + 1 :]:
            if (
                a["x"] < b["x"] + b["w"]
                and b["x"] < a["x"] + a["w"]
                and a["y"] < b["y"] + b["h"]
                and b["y"] < a["y"] + a["h"]
            ):
                problems.append(f"{ta!r} overlaps {tb!r}")
    bands = grid_bands(panels)
    for band, following in zip(bands, [*bands[1:], None], strict=True):
        x = 0
        y = band[0]["gridPos"]["y"]
        heights = {p["gridPos"]["h"] for p in band}
        for p in band:
            if p["gridPos"]["x"] != x:
                problems.append(f"{p['title']!r} starts at x {p['gridPos']['x']}, not {x}")
            x = p["gridPos"]["x"] + p["gridPos"]["w"]
        if x != 24:
            problems.append(f"the band at y {y} ends at column {x}, not 24")
        if len(heights) != 1:
            problems.append(f"the band at y {y} mixes heights {sorted(heights)}")
        if following is not None and following[0]["gridPos"]["y"] != y + max(heights):
            problems.append(f"a gap or overlap below the band at y {y}")
    return problems


def test_layout_problems_are_found() -> None:
    def panel(title: str, x: int, y: int, w: int, h: int = 8) -> dict[str, Any]:
        return {"title": title, "gridPos": {"x": x, "y": y, "w": w, "h": h}}

    assert _layout_problems([panel("a", 0, 0, 12), panel("b", 12, 0, 12)]) == []
    assert "'a' overlaps 'b'" in _layout_problems([panel("a", 0, 0, 12), panel("b", 0, 0, 12)])
    assert "the band at y 0 ends at column 12, not 24" in _layout_problems([panel("a", 0, 0, 12)])
    assert _layout_problems([panel("a", 0, 0, 24), panel("b", 0, 9, 24)]) == [
        "a gap or overlap below the band at y 0"
    ]


def test_no_panels_overlap_and_rows_are_filled() -> None:
    """Grafana places panels by their grid rectangles: overlapping ones are pushed down
    one column, so the dashboard must tile its 24 columns band by band (panels added
    later included; a collapsed row's panels are checked as their own grid)."""
    d = load_dashboard()
    assert _layout_problems(d["panels"]) == []
    for row in d["panels"]:
        if row.get("panels"):
            assert _layout_problems(row["panels"]) == [], row["title"]


def test_layout_picture_is_current() -> None:
    """docs/images/dashboard-layout.svg is the layout of the JSON as it is now (after
    changing panels: `python deploy/grafana/render_layout.py`)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("render_layout", GRAFANA / "render_layout.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    picture = ROOT / "docs" / "images" / "dashboard-layout.svg"
    assert picture.read_text(encoding="utf-8") == module.render_svg(load_dashboard()), (
        "run: python deploy/grafana/render_layout.py"
    )


def test_one_headline_k_across_config_rules_and_dashboard() -> None:
    """metrics.headline_k is the k the alert target, the dashboard's default k and the
    Grafana alert speak of (the UI and the readiness line use it too)."""
    from tracepass.collector.config import MetricsConfig

    headline = str(MetricsConfig().headline_k)
    rules = yaml.safe_load((ROOT / "deploy" / "prometheus" / "tracepass.rules.yaml").read_text())
    targets = [
        r["labels"]["k"]
        for g in rules["groups"]
        for r in g["rules"]
        if r.get("record") == "tracepass:pass_pow_k_target"
    ]
    assert targets == [headline]
    k = next(v for v in load_dashboard()["templating"]["list"] if v["name"] == "k")
    assert k["current"]["value"] == headline
    grafana_alert = (PROVISIONING / "alerting" / "tracepass.yaml").read_text()
    assert f'k="{headline}"' in grafana_alert
    # ... and the target is the readiness rule's (metrics.pass_pow_k_target's default).
    from tracepass.evaluator.stats.readiness import TARGET

    (target,) = [
        r["expr"].strip()
        for g in rules["groups"]
        for r in g["rules"]
        if r.get("record") == "tracepass:pass_pow_k_target"
    ]
    assert target == f"vector({TARGET})" == f"vector({MetricsConfig().pass_pow_k_target})"
    (condition,) = [
        c
        for g in yaml.safe_load(grafana_alert)["groups"]
        for r in g["rules"]
        for q in r["data"]
        for c in q["model"].get("conditions", [])
    ]
    assert condition["evaluator"] == {"type": "lt", "params": [TARGET]}
    assert f"< {TARGET})" in grafana_alert
    # The Kubernetes example config spells the same rule out for operators to edit.
    kube = list(
        yaml.safe_load_all((ROOT / "deploy" / "kubernetes" / "tracepass-config.yaml").read_text())
    )
    serve_config = yaml.safe_load(kube[0]["data"]["tracepass.yaml"])
    assert serve_config["metrics"]["headline_k"] == int(headline)
    assert serve_config["metrics"]["pass_pow_k_target"] == TARGET

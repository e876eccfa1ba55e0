"""Deployment files must be valid for the tools that read them.

What can be checked here without Docker or a cluster: every YAML parses; Kubernetes
objects validate (strict) against the Kubernetes OpenAPI schemas that kubernetes-validate
ships; the OpenTelemetry Collector configs use only keys of the components' documented
config schemas (the loadbalancing exporter's config.schema.yaml), and their pipelines are
wired consistently; kustomize and compose only reference files that exist. The project's
own Collector distribution (`make otelcol`) then validates both configs for real
(`otelcol-tracepass validate`), and tests/deploy/test_gateway_e2e.py runs them.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"
K8S_VERSION = "1.31.0"

# Top-level keys documented for each component (load_balancing: its config.schema.yaml
# plus the embedded exporterhelper timeout/retry configs; routing connector and transform
# processor: their READMEs).
LOAD_BALANCING_KEYS = {
    "protocol",
    "resolver",
    "routing_key",
    "routing_attributes",
    "sending_queue",
    "timeout",
    "retry_on_failure",
}
ROUTING_ATTRIBUTE = "tracepass.routing_key"
RESOLVER_KEYS = {
    "static": {"hostnames"},
    "dns": {"hostname", "port", "interval", "timeout"},
    "k8s": {"service", "ports", "timeout", "return_hostnames"},
    "aws_cloud_map": {"namespace", "service_name", "port", "health_status", "interval", "timeout"},
}
ROUTING_KEYS = {"service", "traceID", "resource", "metric", "streamID", "attributes"}
ROUTING_CONNECTOR_KEYS = {"default_pipelines", "error_mode", "table"}
ROUTING_ROUTE_KEYS = {"context", "condition", "statement", "pipelines"}
TRANSFORM_KEYS = {"error_mode", "trace_statements", "metric_statements", "log_statements"}


def _load_all(path: Path) -> list[Any]:
    with path.open(encoding="utf-8") as fh:
        return [doc for doc in yaml.safe_load_all(fh) if doc is not None]


def _yaml_files() -> list[Path]:
    return sorted(p for p in DEPLOY.rglob("*") if p.suffix in {".yaml", ".yml"})


@pytest.mark.parametrize("path", _yaml_files(), ids=lambda p: str(p.relative_to(DEPLOY)))
def test_yaml_parses(path: Path) -> None:
    assert _load_all(path), f"{path} is empty"


def _k8s_objects() -> list[tuple[str, dict[str, Any]]]:
    out = []
    for path in sorted((DEPLOY / "kubernetes").glob("*.yaml")):
        for doc in _load_all(path):
            out.append((f"{path.name}:{doc['kind']}/{doc['metadata']['name']}", doc))
    return out


@pytest.mark.parametrize(("name", "obj"), _k8s_objects(), ids=[n for n, _ in _k8s_objects()])
def test_kubernetes_objects_validate(name: str, obj: dict[str, Any]) -> None:
    kubernetes_validate.validate(obj, K8S_VERSION, strict=True)


def test_statefulset_uses_headless_service_and_persistent_state() -> None:
    objs = {n.split(":", 1)[1]: o for n, o in _k8s_objects()}
    svc = objs["Service/tracepass-headless"]
    sts = objs["StatefulSet/tracepass"]
    assert svc["spec"]["clusterIP"] == "None"
    assert sts["spec"]["serviceName"] == "tracepass-headless"
    assert sts["spec"]["volumeClaimTemplates"][0]["metadata"]["name"] == "state"
    # The gateway's dns resolver must point at that headless Service.
    gateway = _load_all(DEPLOY / "otelcol" / "gateway.yaml")[0]
    host = gateway["exporters"]["loadbalancing"]["resolver"]["dns"]["hostname"]
    assert host.startswith("tracepass-headless.tracepass.svc")


def test_kustomization_references_existing_files() -> None:
    kust = _load_all(DEPLOY / "kustomization.yaml")[0]
    for res in kust["resources"]:
        assert (DEPLOY / res).is_file(), res
    for gen in kust["configMapGenerator"]:
        for spec in gen["files"]:
            assert (DEPLOY / spec.split("=", 1)[1]).is_file(), spec


def _check_otelcol(config: dict[str, Any]) -> None:
    components = {
        kind: set(config.get(kind) or {})
        for kind in ("receivers", "processors", "exporters", "connectors", "extensions")
    }
    for name, exp in config["exporters"].items():
        if name.split("/")[0] != "loadbalancing":
            continue
        assert set(exp) <= LOAD_BALANCING_KEYS, (
            f"{name}: unknown keys {set(exp) - LOAD_BALANCING_KEYS}"
        )
        assert exp["routing_key"] in ROUTING_KEYS
        if exp["routing_key"] == "attributes":
            assert exp["routing_attributes"] == [ROUTING_ATTRIBUTE]
        assert set(exp["protocol"]) == {"otlp"}
        assert "endpoint" not in exp["protocol"]["otlp"], "the resolver sets endpoints"
        (resolver,) = exp["resolver"].items()
        assert set(resolver[1]) <= RESOLVER_KEYS[resolver[0]]
    for name, conn in (config.get("connectors") or {}).items():
        assert name.split("/")[0] == "routing"
        assert set(conn) <= ROUTING_CONNECTOR_KEYS
        for route in conn["table"]:
            assert set(route) <= ROUTING_ROUTE_KEYS
    for name, proc in (config.get("processors") or {}).items():
        if name.split("/")[0] == "transform":
            assert set(proc) <= TRANSFORM_KEYS
    pipelines = config["service"]["pipelines"]
    for pname, pipe in pipelines.items():
        for rec in pipe["receivers"]:
            assert rec in components["receivers"] | components["connectors"], (pname, rec)
        for proc in pipe.get("processors", []):
            assert proc in components["processors"], (pname, proc)
        for exp in pipe["exporters"]:
            assert exp in components["exporters"] | components["connectors"], (pname, exp)
    # Every pipeline a connector routes to exists and is fed by that connector.
    for cname, conn in (config.get("connectors") or {}).items():
        targets = set(conn["default_pipelines"])
        for route in conn["table"]:
            targets |= set(route["pipelines"])
        for target in targets:
            assert cname in pipelines[target]["receivers"], (cname, target)
    for ext in config["service"].get("extensions", []):
        assert ext in components["extensions"]


@pytest.mark.parametrize("name", ["gateway.yaml", "static-two-replicas.yaml"])
def test_otelcol_configs_match_component_schemas(name: str) -> None:
    _check_otelcol(_load_all(DEPLOY / "otelcol" / name)[0])


def test_otelcol_keeps_traces_whole_before_routing() -> None:
    """groupbytrace, then the conversationid processor writing the one attribute the
    loadbalancing exporter routes on, for traces and logs (then batch: the released
    traces leave together); the queue is persistent."""
    for name in ("gateway.yaml", "static-two-replicas.yaml"):
        config = _load_all(DEPLOY / "otelcol" / name)[0]
        pipelines = config["service"]["pipelines"]
        assert pipelines["traces"]["processors"][-3:] == ["groupbytrace", "conversationid", "batch"]
        assert pipelines["logs"]["processors"][-1] == "conversationid"
        assert config["processors"]["conversationid"]["routing_attribute"] == ROUTING_ATTRIBUTE
        wait = config["processors"]["groupbytrace"]["wait_duration"]
        log_wait = config["processors"]["conversationid"]["log_wait_duration"]
        assert float(log_wait.rstrip("s")) > float(wait.rstrip("s"))
        lb = config["exporters"]["loadbalancing"]
        storage = lb["sending_queue"]["storage"]
        assert storage in config["extensions"]
        assert storage in config["service"]["extensions"]
        assert lb["protocol"]["otlp"]["sending_queue"]["enabled"] is False


def _otelcol_binary() -> Path:
    binary = DEPLOY.parent / ".tools" / "bin" / "otelcol-tracepass"
    if not binary.exists():
        reason = os.environ.get("TRACEPASS_GATEWAY_SKIP")  # .ci/run without go
        if reason:
            pytest.skip(reason)
        if os.environ.get("TRACEPASS_REQUIRE_SYSTEM_TOOLS") == "1":
            pytest.fail("otelcol-tracepass is required in CI: `make otelcol` builds it")
        pytest.skip("otelcol-tracepass not built (`make otelcol`)")
    return binary


@pytest.mark.slow
@pytest.mark.parametrize("name", ["gateway.yaml", "static-two-replicas.yaml"])
def test_otelcol_configs_validate_with_the_real_collector(name: str) -> None:
    done = subprocess.run(
        [str(_otelcol_binary()), "validate", f"--config={DEPLOY / 'otelcol' / name}"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr


def test_make_test_runs_the_go_component_tests() -> None:
    """`go test` of the project's Collector processor runs from `make test` (target
    `otelcol-test`, skipped with a message where go is absent), not from pytest: CI
    runs it once, on the Go caches `make otelcol` filled (.tools/go)."""
    makefile = (DEPLOY.parent / "Makefile").read_text(encoding="utf-8")
    test_deps = next(line for line in makefile.splitlines() if line.startswith("test:"))
    assert "otelcol-test" in test_deps.split()
    recipe = makefile.split("\notelcol-test:", 1)[1].split("\n\n", 1)[0]
    assert "go-env.sh" in recipe
    assert "go test" in recipe
    assert "go not found" in recipe


def test_compose_mounts_existing_files() -> None:
    compose = _load_all(DEPLOY / "compose" / "docker-compose.yaml")[0]
    base = DEPLOY / "compose"
    for svc in compose["services"].values():
        for vol in svc.get("volumes", []):
            src = vol.split(":", 1)[0]
            if src.startswith("."):
                assert (base / src).exists(), src


def test_images_run_the_one_distribution() -> None:
    """The Dockerfile's gateway image is built by `make otelcol`'s script from the same
    builder manifest, and compose and Kubernetes run that image; every component the
    configs use is in the manifest."""
    dockerfile = (DEPLOY / "Dockerfile").read_text(encoding="utf-8")
    stages = dockerfile.split("\nFROM ")
    build = next(s for s in stages if " AS otelcol-build" in s.splitlines()[0])
    assert any(
        line.startswith("RUN ") and line.endswith(" deploy/otelcol/build.sh")
        for line in build.splitlines()
    )
    runtime = next(s for s in stages if s.splitlines()[0].endswith(" AS otelcol"))
    assert "/src/.tools/bin/otelcol-tracepass" in runtime
    assert "--config deploy/otelcol/builder-config.yaml" in (
        DEPLOY / "otelcol" / "build.sh"
    ).read_text(encoding="utf-8")
    image = "tracepass-otelcol:0.1.0"
    assert f"--target otelcol -t {image}" in dockerfile
    objs = {n.split(":", 1)[1]: o for n, o in _k8s_objects()}
    pod = objs["Deployment/otelcol-gateway"]["spec"]["template"]["spec"]
    assert [c["image"] for c in pod["containers"]] == [image]
    compose = _load_all(DEPLOY / "compose" / "docker-compose.yaml")[0]
    otelcol = compose["services"]["otelcol"]
    assert otelcol["image"] == image
    assert (otelcol["build"]["dockerfile"], otelcol["build"]["target"]) == (
        "deploy/Dockerfile",
        "otelcol",
    )
    manifest = _load_all(DEPLOY / "otelcol" / "builder-config.yaml")[0]
    for kind in ("receivers", "processors", "exporters", "extensions"):
        modules = [m["gomod"].split()[0].rsplit("/", 1)[1] for m in manifest.get(kind) or []]
        for name in ("gateway.yaml", "static-two-replicas.yaml"):
            config = _load_all(DEPLOY / "otelcol" / name)[0]
            for component in config.get(kind) or {}:
                kind_name = component.split("/")[0].replace("_", "")
                assert any(m.startswith(kind_name) for m in modules), (name, kind, component)


def test_gateway_reads_the_conversation_id_keys_tracepass_reads() -> None:
    """The Go processor's built-in keys are tracepass's, in the same order (the gateway
    must route by the id tracepass will group by)."""
    import re

    from tracepass.collector.normalize.conversation_ids import CONVERSATION_ID_KEYS

    source = (DEPLOY / "otelcol" / "conversationidprocessor" / "config.go").read_text(
        encoding="utf-8"
    )
    block = source.split("var builtinKeys = []string{", 1)[1].split("}", 1)[0]
    assert tuple(re.findall(r'"([^"]+)"', block)) == CONVERSATION_ID_KEYS

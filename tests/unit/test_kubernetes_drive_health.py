"""deploy/kubernetes/drive-health/: the exporter as a node-level DaemonSet reading the SQL Server node's
drives. No cluster here: the manifests are checked as YAML, against each other, against the config the
exporter accepts (parse_config) and against the rules' selectors, the way the Deployment in
deploy/kubernetes/ is (test_packaging.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from mssql_memory_exporter.config import parse_config

from alerts.spec import load as load_spec
from tests.integration.test_compose import KUBERNETES, job_matches_selector, load_yaml
from tests.unit.test_packaging import kubernetes_objects

DRIVE_HEALTH = KUBERNETES / "drive-health"


def objects() -> dict[str, dict[str, Any]]:
    found = kubernetes_objects(DRIVE_HEALTH)
    assert set(found) == {"ConfigMap", "DaemonSet", "PodMonitor"}
    return found


def test_the_main_kustomization_does_not_apply_it() -> None:
    # Privileged and node-bound: applied on purpose, never with the remote exporter.
    main = load_yaml(KUBERNETES / "kustomization.yaml")
    assert not any("drive-health" in resource for resource in main["resources"])


def config(tmp_path: Path) -> tuple[Any, dict[str, Any]]:
    """The ConfigMap's exporter config as the exporter loads it, and the raw mapping."""
    [(_, text)] = objects()["ConfigMap"]["data"].items()
    data = yaml.safe_load(text)
    raw = yaml.safe_load(text)
    for module in data["auth_modules"].values():
        key = module["password_file"].rpartition("/")[2]
        (tmp_path / key).write_text("placeholder", encoding="utf-8")
        module["password_file"] = str(tmp_path / key)
    return parse_config(data, source="deploy/kubernetes/drive-health/configmap.yaml"), raw


def test_the_config_loads_and_reads_the_nodes_drives_as_root(tmp_path: Path) -> None:
    loaded, raw = config(tmp_path)
    assert loaded.drive_health is not None
    # Root in the pod: smartctl itself, not through sudo (there is no sudoers file in the image).
    assert raw["drive_health"]["smartctl"] == "/usr/sbin/smartctl"
    drives = {drive["name"] for drive in raw["drive_health"]["drives"]}
    for name, target in raw["targets"].items():
        assert target["colocated"] is True, name
        for pool in target.get("ssd_pools", {}).values():
            linked = set(pool.get("host_disks", [])) | set(pool.get("smart_drives", []))
            assert linked and linked <= drives, "every pool's drives are read, so it gets source=drive"
            assert len(linked) == pool["drives"]["count"], "source=drive needs every drive of the pool"


def test_the_daemonset_runs_the_config_on_the_sql_server_node_with_its_drives(tmp_path: Path) -> None:
    found = objects()
    daemonset, config_map = found["DaemonSet"], found["ConfigMap"]
    pod = daemonset["spec"]["template"]
    assert daemonset["spec"]["selector"]["matchLabels"].items() <= pod["metadata"]["labels"].items()
    assert pod["spec"]["nodeSelector"], "only on the SQL Server's node"
    [container] = pod["spec"]["containers"]
    assert "--collector.host" in container["args"]
    security = container["securityContext"]
    assert security["privileged"] is True and security["runAsUser"] == 0
    volumes = {volume["name"]: volume for volume in pod["spec"]["volumes"]}
    mounts = {mount["name"]: mount for mount in container["volumeMounts"]}
    dev = next(name for name, volume in volumes.items() if volume.get("hostPath", {}).get("path") == "/dev")
    assert mounts[dev]["mountPath"] == "/dev" and mounts[dev]["readOnly"] is True
    # The config file is the ConfigMap's key where it is mounted; the password file is the Secret's.
    config_volume = next(name for name, volume in volumes.items() if "configMap" in volume)
    assert volumes[config_volume]["configMap"]["name"] == config_map["metadata"]["name"]
    [file_name] = config_map["data"]
    config_arg = next(a for a in container["args"] if a.startswith("--config.file="))
    assert config_arg.split("=", 1)[1] == f"{mounts[config_volume]['mountPath']}/{file_name}"
    _, raw = config(tmp_path)
    secret = next(name for name, volume in volumes.items() if "secret" in volume)
    main_deployment = load_yaml(KUBERNETES / "deployment.yaml")
    main_secrets = [
        v["secret"]["secretName"]
        for v in main_deployment["spec"]["template"]["spec"]["volumes"]
        if "secret" in v
    ]
    assert volumes[secret]["secret"]["secretName"] in main_secrets, "the Secret of deploy/kubernetes/"
    for module in raw["auth_modules"].values():
        assert module["password_file"].rpartition("/")[0] == mounts[secret]["mountPath"]


def test_the_podmonitor_lands_on_the_rules_selectors(tmp_path: Path) -> None:
    found = objects()
    monitor, daemonset = found["PodMonitor"], found["DaemonSet"]
    pod_labels = daemonset["spec"]["template"]["metadata"]["labels"]
    assert monitor["spec"]["selector"]["matchLabels"].items() <= pod_labels.items()
    [container] = daemonset["spec"]["template"]["spec"]["containers"]
    ports = {port["name"] for port in container["ports"]}
    spec = load_spec()
    _, raw = config(tmp_path)
    probed = []
    for endpoint in monitor["spec"]["podMetricsEndpoints"]:
        assert endpoint["port"] in ports
        labels = {r["targetLabel"]: r["replacement"] for r in endpoint["relabelings"]}
        probe = endpoint["path"] == "/probe"
        # /probe under the SQL Server selector, /metrics (the drives' series) under the exporter's own.
        assert job_matches_selector(labels["job"], spec.selector) is probe, endpoint
        assert job_matches_selector(labels["job"], spec.exporter_selector) is not probe, endpoint
        if probe:
            [target] = endpoint["params"]["target"]
            assert labels["instance"] == target
            probed.append(target)
    assert sorted(probed) == sorted(raw["targets"]), "one /probe endpoint per configured target"

"""Kerberos deploy files: the systemd drop-in (deploy/systemd/mssql-memory-exporter.service.d/kerberos.conf)
loads with the shipped unit and relaxes none of its hardening; the Kubernetes component
(deploy/kubernetes/kerberos/) patches the shipped Deployment's own container, mounting the keytab where
its instructions tell the config to look and krb5.conf where KRB5_CONFIG points."""

from __future__ import annotations

import re
from pathlib import Path

from tests import tools
from tests.integration.test_compose import ROOT, SYSTEMD_UNIT
from tests.promtool.test_systemd_drive_health import installed, run, security
from tests.unit.test_packaging import load_yaml

DROP_IN = SYSTEMD_UNIT.parent / f"{SYSTEMD_UNIT.name}.d" / "kerberos.conf"
COMPONENT = ROOT / "deploy" / "kubernetes" / "kerberos"
DEPLOYMENT = ROOT / "deploy" / "kubernetes" / "deployment.yaml"


def _install_kerberos(tmp_path: Path) -> Path:
    tmp_path.mkdir(parents=True)
    unit = installed(tmp_path, None)
    directory = tmp_path / f"{SYSTEMD_UNIT.name}.d"
    directory.mkdir()
    (directory / DROP_IN.name).write_text(DROP_IN.read_text(encoding="utf-8"), encoding="utf-8")
    return unit


@tools.needs(tools.SYSTEMD_ANALYZE)
def test_kerberos_drop_in_passes_verify_and_relaxes_nothing(tmp_path: Path) -> None:
    unit = _install_kerberos(tmp_path / "with")
    result = run(["systemd-analyze", "verify", str(unit)])
    lines = (result.stdout + result.stderr).splitlines()
    problems = [line for line in lines if unit.name in line or DROP_IN.name in line]
    assert result.returncode == 0 and not problems, "\n".join(problems) or result.stderr
    (tmp_path / "without").mkdir()
    assert security(unit) == security(installed(tmp_path / "without", None))


def test_kerberos_drop_in_hands_over_the_keytab_its_instructions_name() -> None:
    text = DROP_IN.read_text(encoding="utf-8")
    credential = re.search(r"^LoadCredential=([^:]+):(\S+)$", text, re.M)
    assert credential, text
    name, source = credential.groups()
    assert f"/run/credentials/{SYSTEMD_UNIT.name}/{name}" in text  # where the config must point
    assert f"install -m 0600 svc-mssql-exporter.keytab {source}" in text


def test_kerberos_kubernetes_component_patches_the_shipped_container() -> None:
    kustomization = load_yaml(COMPONENT / "kustomization.yaml")
    assert kustomization["kind"] == "Component"
    patch = load_yaml(COMPONENT / kustomization["patches"][0]["path"])
    shipped = load_yaml(DEPLOYMENT)
    assert patch["metadata"]["name"] == shipped["metadata"]["name"]
    container = patch["spec"]["template"]["spec"]["containers"][0]
    assert container["name"] == shipped["spec"]["template"]["spec"]["containers"][0]["name"]
    mounts = {m["name"]: m["mountPath"] for m in container["volumeMounts"]}
    volumes = {v["name"]: v for v in patch["spec"]["template"]["spec"]["volumes"]}
    # The keytab: group-readable for the pod's fsGroup, the exporter's own group: not for every user.
    keytab_volume = volumes["kerberos-keytab"]["secret"]
    assert keytab_volume["defaultMode"] == 0o440
    assert shipped["spec"]["template"]["spec"]["securityContext"]["fsGroup"]
    documented = re.search(r"keytab: (\S+)", (COMPONENT / "kustomization.yaml").read_text())
    assert documented and documented.group(1).startswith(mounts["kerberos-keytab"] + "/")
    env = {e["name"]: e["value"] for e in container["env"]}
    assert env["KRB5_CONFIG"] == mounts["krb5-conf"] + "/krb5.conf"

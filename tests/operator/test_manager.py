"""The operator's settings: per kind from the environment, spelt as the Ansible Operator spells them, and a
bad one refused before anything starts."""
from __future__ import annotations

from pathlib import Path

import pytest

from metal3_operator.manager import verbosity_for, workers_for
from metal3_operator.watches import Watch

REPO = Path(__file__).resolve().parents[2]

CLAIM = Watch("ipam.metal3.io", "v1alpha1", "IPClaim", role="r")


@pytest.mark.parametrize("environment, expected", [
    ({}, 2),
    ({"MAX_CONCURRENT_RECONCILES_IPCLAIM_IPAM_METAL3_IO": "4"}, 4),
    ({"WORKER_IPCLAIM_IPAM_METAL3_IO": "3"}, 3),  # the legacy spelling
    ({"MAX_CONCURRENT_RECONCILES_IPCLAIM_IPAM_METAL3_IO": "4", "WORKER_IPCLAIM_IPAM_METAL3_IO": "3"}, 4),
    ({"MAX_CONCURRENT_RECONCILES_IPPOOL_IPAM_METAL3_IO": "9"}, 2),  # another kind's
])
def test_workers_per_kind(monkeypatch, environment, expected):
    for name, value in environment.items():
        monkeypatch.setenv(name, value)
    assert workers_for(CLAIM, 2) == expected


@pytest.mark.parametrize("environment, expected", [
    ({}, 0),
    ({"ANSIBLE_VERBOSITY_IPCLAIM_IPAM_METAL3_IO": "3"}, 3),
    ({"ANSIBLE_VERBOSITY_IPCLAIM_IPAM_METAL3_IO": "7"}, 7),
])
def test_verbosity_per_kind(monkeypatch, environment, expected):
    for name, value in environment.items():
        monkeypatch.setenv(name, value)
    assert verbosity_for(CLAIM, 0) == expected


@pytest.mark.parametrize("name, value, setting", [
    ("MAX_CONCURRENT_RECONCILES_IPCLAIM_IPAM_METAL3_IO", "0", workers_for),
    ("MAX_CONCURRENT_RECONCILES_IPCLAIM_IPAM_METAL3_IO", "many", workers_for),
    ("ANSIBLE_VERBOSITY_IPCLAIM_IPAM_METAL3_IO", "8", verbosity_for),
    ("ANSIBLE_VERBOSITY_IPCLAIM_IPAM_METAL3_IO", "-1", verbosity_for),
])
def test_a_bad_value_is_an_error_naming_the_variable(monkeypatch, name, value, setting):
    monkeypatch.setenv(name, value)
    with pytest.raises(ValueError, match=f"^{name}='{value}': must be an integer from"):
        setting(CLAIM, 1)


@pytest.mark.parametrize("arguments, environment, message", [
    (["--reconcile-period", "soon"], {}, "--reconcile-period: 'soon' is not a duration"),
    (["--graceful-shutdown-timeout", "1 minute"], {}, "--graceful-shutdown-timeout: '1 minute' is not a duration"),
    ([], {"MAX_CONCURRENT_RECONCILES_IPCLAIM_IPAM_METAL3_IO": "0"},
     "MAX_CONCURRENT_RECONCILES_IPCLAIM_IPAM_METAL3_IO='0': must be an integer from 1"),
    ([], {"ANSIBLE_VERBOSITY_BAREMETALHOST_METAL3_IO": "9"},
     "ANSIBLE_VERBOSITY_BAREMETALHOST_METAL3_IO='9': must be an integer from 0 to 7"),
    (["--watches-file", "missing.yaml"], {}, "cannot read missing.yaml"),
])
def test_a_bad_setting_stops_the_operator_before_it_starts_anything(
        operator_main, tmp_path, monkeypatch, capsys, arguments, environment, message):
    for name, value in environment.items():
        monkeypatch.setenv(name, value)
    assert operator_main(*arguments) == 2
    err = capsys.readouterr().err
    assert err.startswith("metal3_operator: ") and message in err and "Traceback" not in err
    assert not (tmp_path / "runner").exists()  # no runner, no prefork server


def test_an_unreachable_cluster_is_a_message_not_a_traceback(operator_main, capsys):
    assert operator_main() == 2
    err = capsys.readouterr().err
    assert err.startswith("metal3_operator: cannot reach the Kubernetes API at https://127.0.0.1:1") and \
        "Traceback" not in err


@pytest.mark.kubernetes
def test_a_kind_the_cluster_does_not_serve_is_named(operator_main, kube_cluster, tmp_path, capsys):
    watches = tmp_path / "watches.yaml"
    watches.write_text("- {version: v1, group: example.com, kind: Probe, role: metal3.baremetal.ipam_reconcile}\n")
    assert operator_main("--watches-file", str(watches), kubeconfig=kube_cluster.kubeconfig) == 2
    err = capsys.readouterr().err
    assert err.startswith("metal3_operator: Probe example.com/v1: the cluster does not serve it") and \
        "Traceback" not in err

"""The one health verdict (envkit/prefix/health.py) as read from a record: where it came from, and the
GPU part proven on the node a Slurm probe ran on."""

from __future__ import annotations

from typing import Any

from envkit.prefix.envrecord import EnvRecord
from envkit.prefix.health import health_of


def test_a_gpu_probe_on_a_slurm_node_is_proven_on_that_node() -> None:
    record: dict[str, Any] = {
        "probe": {
            "status": "pass",
            "checks": {"gpu": "pass", "ddp-gloo": "pass"},
            "at": "2026-12-05T10:00:00+00:00",
            "node": "gpu017",
            "slurm_job": "4242",
            "gpu": {"proven": True},
        }
    }
    health = health_of(EnvRecord.from_json(record))
    assert health.state == "healthy"
    assert health.line() == "healthy (probe at 2026-12-05T10:00:00+00:00 on gpu017 (Slurm job 4242); proven on a GPU on gpu017)"


def test_a_login_node_probe_leaves_the_gpu_part_unproven() -> None:
    record: dict[str, Any] = {
        "probe": {
            "status": "warn",
            "checks": {"threads": "warn"},
            "at": "2026-12-05T10:00:00+00:00",
            "node": "login1",
            "gpu": {"proven": False},
        }
    }
    assert (
        health_of(EnvRecord.from_json(record)).line()
        == "warn (probe at 2026-12-05T10:00:00+00:00 on login1; threads warned; not yet proven on a GPU)"
    )


def test_a_hand_edited_node_name_cannot_break_the_line() -> None:
    record: dict[str, Any] = {"probe": {"status": "pass", "checks": {}, "at": "2026-12-05", "node": "n1\x1b[2J\nrm", "slurm_job": 7}}
    line = health_of(EnvRecord.from_json(record)).line()
    assert line == "healthy (probe at 2026-12-05 on n1\\x1b[2J\\nrm)" and "\x1b" not in line and "\n" not in line


def test_no_probe_is_said_as_the_static_audit_alone() -> None:
    assert health_of(EnvRecord.from_json({})).line() == "not probed (not probed: the static audit alone)"
    assert health_of(None).state == "not probed"

"""Helpers for the placement tests: a LiveContext built from a fixture tree (pure resolution) and
the torch import with a loud reason when it is missing."""

from __future__ import annotations

import pytest

from numatune.live.bind import read_launch_devices
from numatune.placement.targets import LiveContext
from numatune.readers.topology import read_topology
from numatune.system.host import Host
from tests.conftest import fixture_root

HM = "handmade-launch-2s4gpu-cxl"  # 2 sockets, 4 GPUs (2 per node), CXL nodes 2 and 3 with HMAT


def context_of(name: str, here: int | None = 0, env: dict | None = None, mems=None, cgroup=None) -> LiveContext:
    host = Host.open(fixture_root(name))
    topo = read_topology(host, cxl=True, settings=False)
    return LiveContext(topo, here, f"test: node {here}", tuple(read_launch_devices(host, topo)), env or {}, mems,
                       cgroup)


@pytest.fixture
def torch():
    return pytest.importorskip(
        "torch", reason="PyTorch is not installed: install it with `pip install torch==2.13.0` (scripts/test.sh "
                        "does) to run the tensor placement tests")


@pytest.fixture
def np():
    return pytest.importorskip("numpy", reason="numpy is not installed (scripts/test.sh installs it)")

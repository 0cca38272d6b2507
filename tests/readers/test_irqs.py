"""/proc/interrupts parsing on every corpus sample, device joins on hand-made and captured roots."""

from __future__ import annotations

import bz2
import json
import shutil
import sys
from pathlib import Path

import pytest

from numatune.readers.irqs import identify_action, parse_interrupts, read_irq_report
from numatune.readers.topology import read_topology
from numatune.system.host import Host

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from tests.conftest import fixture_root  # noqa: E402
from tests.irq_roots import GPU, NIC, NVME, build_root  # noqa: E402

SAMPLES = ["procfs-4cpu-kvm", "pcp-8cpu-x86_64", "pcp-16cpu-s390x", "dev-1node-x86"]


def naive_totals(text: str) -> dict[int, int]:
    """An independent oracle: split every numeric row, sum the leading numeric fields (at most #CPUs)."""
    lines = [line for line in text.splitlines() if line.strip()]
    ncpu = sum(1 for tok in lines[0].split() if tok.startswith("CPU"))
    out = {}
    for line in lines[1:]:
        head, _, rest = line.partition(":")
        if not head.strip().isdigit():
            continue
        total = 0
        for tok in rest.split()[:ncpu]:
            if not tok.isdigit():
                break
            total += int(tok)
        out[int(head)] = total
    return out


@pytest.fixture(scope="module")
def big_interrupts(tmp_path_factory) -> Path:
    """The 1152-CPU sample, decompressed once into a root of its own."""
    root = tmp_path_factory.mktemp("pcp1152") / "root"
    (root / "proc").mkdir(parents=True)
    data = bz2.decompress((fixture_root("pcp-1152cpu-x86_64") / "proc/interrupts.bz2").read_bytes())
    (root / "proc/interrupts").write_bytes(data)
    return root


@pytest.mark.parametrize("name", SAMPLES)
def test_every_sample_parses_and_totals_match_oracle(name):
    text = (fixture_root(name) / "proc/interrupts").read_text()
    table = parse_interrupts(text)
    oracle = naive_totals(text)
    assert table.numeric_rows == len(oracle) > 0
    assert {irq: row.total for irq, row in table.rows.items()} == oracle
    assert len(table.cpus) == len(text.splitlines()[0].split())


def test_1152_cpus_parse_with_oracle(big_interrupts):
    text = (big_interrupts / "proc/interrupts").read_text()
    table = parse_interrupts(text)
    assert len(table.cpus) == 1152 and table.cpus[-1] == 1151
    assert table.numeric_rows == 1034
    assert {irq: row.total for irq, row in table.rows.items()} == naive_totals(text)
    assert table.rows[1160].actions == ("i40e-0000:c3:00.3:fdir-TxRx-0",)
    # Action names with a space and shared lines stay whole.
    assert table.rows[24].actions == ("PCIe PME",)


def test_s390_layout_named_rows_first_no_hwirq():
    table = parse_interrupts((fixture_root("pcp-16cpu-s390x") / "proc/interrupts").read_text())
    row = table.rows[4]
    assert row.chip == "PCI-MSI" and row.hwirq is None
    assert row.actions == ("mlx5_comp0@pci:0002:00:00.0",)
    assert row.per_cpu == ((3, 1),)
    assert table.rows[23].actions == ("0000:00:00.0",)
    assert 0 not in table.rows  # EXT/I/O/AIO are named rows, not IRQ 0


def test_blank_lines_err_mis_and_shared_actions():
    text = (fixture_root("procfs-4cpu-kvm") / "proc/interrupts").read_text()
    assert "\n\n" in text and "ERR:" in text
    table = parse_interrupts(text)
    assert table.rows[36].per_cpu == ((1, 335), (2, 37))
    shared = parse_interrupts((fixture_root("pcp-8cpu-x86_64") / "proc/interrupts").read_text())
    assert shared.rows[16].actions == ("ehci_hcd:usb3", "mmc0")
    assert shared.rows[16].trigger == "fasteoi"


def test_wide_counts_fewer_columns_and_arm_layout():
    text = (
        "           CPU0       CPU1\n"
        "  5: 12345678901          7   GICv3  27 Level     arch_timer\n"  # an 11-digit count shifts the columns
        " 11:          1  ITS-MSI 524288 Edge      nvme0q0\n"  # fewer columns than CPUs
        " 12:  IR-PCI-MSI 475136-edge      PCIe PME\n"  # no counts at all
        "\n"
        "ERR:          0\n"
    )
    table = parse_interrupts(text)
    assert table.rows[5].total == 12345678908 and table.rows[5].per_cpu == ((0, 12345678901), (1, 7))
    assert table.rows[5].chip == "GICv3" and table.rows[5].hwirq == "27" and table.rows[5].trigger == "Level"
    assert table.rows[11].actions == ("nvme0q0",) and table.rows[11].total == 1
    assert table.rows[12].actions == ("PCIe PME",) and table.rows[12].total == 0
    assert table.irregular_rows == 3


def test_wanted_rows_only():
    text = (fixture_root("pcp-16cpu-s390x") / "proc/interrupts").read_text()
    table = parse_interrupts(text, lambda irq, tail: "mlx5_comp" in tail)
    assert sorted(table.rows) == list(range(4, 13)) + list(range(14, 23))
    assert table.numeric_rows == 22


def test_empty_and_header_only():
    assert parse_interrupts("").rows == {}
    assert parse_interrupts("      CPU0\n").cpus == (0,)


@pytest.mark.parametrize(
    "name, expected",
    [
        ("mlx5_comp3@pci:0000:81:00.0", ("bdf", "0000:81:00.0", "queue", 3)),
        ("mlx5_async@pci:0002:00:00.0", ("bdf", "0002:00:00.0", "control", None)),
        ("i40e-enp195s0f3-TxRx-59", ("netdev", "enp195s0f3", "queue", 59)),
        ("eth0-TxRx-2", ("netdev", "eth0", "queue", 2)),
        ("ens1f0-rx-4", ("netdev", "ens1f0", "queue", 4)),
        ("i40e-0000:c3:00.3:fdir-TxRx-0", ("bdf", "0000:c3:00.3", "control", None)),
        ("nvme0q0", ("nvme", "nvme0", "control", None)),
        ("nvme12q7", ("nvme", "nvme12", "queue", 7)),
    ],
)
def test_identify_action(name, expected):
    m = identify_action(name)
    assert (m.key_kind, m.key, m.role, m.queue) == expected


@pytest.mark.parametrize("name", ["timer", "i8042", "lpfc:3", "smartpqi", "virtio0-input.0", "PCIe PME"])
def test_identify_action_ignores_others(name):
    assert identify_action(name) is None


def test_report_on_handmade_root(tmp_path):
    root = build_root(tmp_path, irqbalance=True)
    host = Host.open(root)
    report = read_irq_report(host, read_topology(host))
    devs = {d.key: d for d in report.devices}
    assert set(devs) == {NIC, NVME, GPU, "ens9"}
    nic = devs[NIC]
    assert nic.node == 1 and nic.netdevs == ("eth1",) and nic.rdma == ("mlx5_0",)
    assert [i.irq for i in nic.irqs] == [40, 41, 42, 43, 44]
    comp0 = nic.irqs[1]
    assert comp0.role == "queue" and comp0.queue == 0 and comp0.found_by == ("msi_irqs",)
    assert comp0.smp_affinity_list == (0, 1, 2, 3) and comp0.effective_affinity_list == (0,)
    assert comp0.per_cpu == ((0, 9000),) and comp0.smp_affinity == "0000000f"
    assert nic.irqs[0].role == "control"
    nvme = devs[NVME]
    assert [(i.irq, i.role, i.managed) for i in nvme.irqs] == [(50, "control", None), (51, "queue", True),
                                                                (52, "queue", True)]
    name_only = devs["ens9"]
    assert not name_only.in_sysfs and name_only.node is None and name_only.irqs[0].found_by == ("name",)
    assert report.irqbalance_running is True and report.irqbalance_banned == (6, 7)
    assert 0 not in {i.irq for d in report.devices for i in d.irqs}


def test_the_process_table_is_walked_once_for_settings_and_irqs(tmp_path, monkeypatch):
    from numatune.readers.settings import read_settings

    root = build_root(tmp_path, irqbalance=True)
    host = Host.open(root)
    walks = []
    listdir = Host.listdir
    monkeypatch.setattr(Host, "listdir", lambda self, p: walks.append(p) or listdir(self, p))
    assert read_settings(host).irqbalance_running is True
    assert read_irq_report(host, read_topology(host)).irqbalance_running is True
    assert walks.count("/proc") == 1


def test_debugfs_marks_managed(tmp_path):
    root = build_root(tmp_path)
    dbg = root / "sys/kernel/debug/irq/irqs"
    dbg.mkdir(parents=True)
    (dbg / "41").write_text("handler:  handle_edge_irq\ndevice:   0000:81:00.0\ndstate:   0x3\n"
                            "            IRQD_ACTIVATED\n            IRQD_AFFINITY_MANAGED\n")
    (dbg / "42").write_text("handler:  handle_edge_irq\ndstate:   0x3\n            IRQD_ACTIVATED\n")
    host = Host.open(root)
    nic = next(d for d in read_irq_report(host, read_topology(host)).devices if d.key == NIC)
    by = {i.irq: i for i in nic.irqs}
    assert by[41].managed is True and "IRQD_AFFINITY_MANAGED" in by[41].managed_evidence
    assert by[42].managed is False
    assert by[43].managed is None  # no debugfs entry: unknown


def test_irq_listed_by_msi_but_gone(tmp_path):
    root = build_root(tmp_path)
    shutil.rmtree(root / "proc/irq/43")
    text = (root / "proc/interrupts").read_text().splitlines()
    (root / "proc/interrupts").write_text("\n".join(line for line in text if not line.startswith("  43:")) + "\n")
    host = Host.open(root)
    nic = next(d for d in read_irq_report(host, read_topology(host)).devices if d.key == NIC)
    assert {i.irq: i.present for i in nic.irqs}[43] is False


def test_secret_environment_never_kept(tmp_path):
    root = build_root(tmp_path, irqbalance=True)
    host = Host.open(root)
    report = read_irq_report(host, read_topology(host))
    assert "hunter2" not in json.dumps(repr(report))


def test_report_s390_mlx5_by_name():
    host = Host.open(fixture_root("pcp-16cpu-s390x"))
    report = read_irq_report(host, read_topology(host))
    devs = {d.key: d for d in report.devices}
    assert set(devs) == {"0002:00:00.0", "0003:00:00.0"}
    for dev in devs.values():
        assert dev.kind == "nic" and not dev.in_sysfs and len(dev.irqs) == 10
        assert sum(1 for i in dev.irqs if i.role == "queue") == 9
    assert any("/proc/irq" in s.subject for s in report.skipped)


def test_report_1152_cpus(big_interrupts):
    host = Host.open(big_interrupts)
    report = read_irq_report(host, read_topology(host))
    netdevs = {d.key: d for d in report.devices if d.netdevs}
    assert set(netdevs) == {"eth0", "enp195s0f1", "enp195s0f2", "enp195s0f3"}
    assert all(len(d.irqs) == 94 for d in netdevs.values())
    fdir = [d for d in report.devices if d.bdf == "0000:c3:00.3"]
    assert fdir and all(i.role == "control" for i in fdir[0].irqs)


def test_report_on_captured_tree():
    host = Host.open(fixture_root("dev-1node-x86"))
    report = read_irq_report(host, read_topology(host))
    nic = report.devices[0]
    assert nic.kind == "nic" and nic.netdevs == ("eth0",)
    assert [i.irq for i in nic.irqs] == [37, 38, 39]
    assert all(i.found_by == ("msi_irqs",) and i.smp_affinity_list is not None for i in nic.irqs)
    assert nic.node == 0 and nic.node_inferred  # the only node

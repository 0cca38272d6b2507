"""Live-only enrichment: used on the live node, never on a saved root, and never fatal."""

from __future__ import annotations

from numatune.live.enrich import enrich_topology
from numatune.readers.topology import read_topology
from numatune.system.host import Host
from tests.conftest import fixture_root


def test_saved_root_is_never_enriched():
    topo = read_topology(Host.open(fixture_root("128arm-2pa2n8cluster4co")))
    called = []
    out = enrich_topology(topo, cpu_brand=lambda: called.append(1) or "X")
    assert out is topo and not called


def test_live_fills_gaps_and_survives_failures():
    topo = read_topology(Host.open("/"))
    topo = topo._replace(cpu=topo.cpu._replace(model=None))

    def broken(_path):
        raise RuntimeError("udev is not running")

    out = enrich_topology(topo, cpu_brand=lambda: "Brand X", udev_names=broken)
    assert out.cpu.model == "Brand X" and out.cpu.model_source == "py-cpuinfo"
    assert [d.vendor_name for d in out.devices] == [d.vendor_name for d in topo.devices]
    named = enrich_topology(topo, cpu_brand=lambda: None, udev_names=lambda p: ("Vendor", "Model"))
    assert all(d.vendor_name == "Vendor" for d in named.devices if d.path)
    assert named.cpu.model is None  # a failed or empty brand leaves the field unknown, not invented


def test_real_libraries_do_not_raise():
    topo = read_topology(Host.open("/"))
    enrich_topology(topo)  # real py-cpuinfo and pyudev (udev may not run here): must not raise


def test_check_asks_for_no_device_names():
    """check's report names no device by vendor or model: no udev lookup, no pci.ids (names=False)."""
    topo = read_topology(Host.open("/"))
    asked = []
    out = enrich_topology(topo, cpu_brand=lambda: None, udev_names=lambda p: asked.append(p) or ("V", "M"),
                          names=False)
    assert not asked and [d.vendor_name for d in out.devices] == [d.vendor_name for d in topo.devices]


def test_check_reads_no_pci_ids(monkeypatch, tmp_path):
    import numatune.readers.pci as pci
    from numatune.commands.check import check_report

    opened = []
    monkeypatch.setattr(pci, "_name_devices", lambda devices, ids: opened.append(ids) or devices)
    monkeypatch.setenv("NUMATUNE_PCI_IDS", str(tmp_path / "pci.ids"))
    root = fixture_root("32em64t-2n8c+dax+nvme+mic+dimms")
    text, _, _ = check_report(Host.open(root), str(root))
    assert opened == [] and "NT" in text

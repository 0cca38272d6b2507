"""SYNTHETIC fleets of inspect reports (not captures): NVL72-like GB200 racks, and an InfiniBand-only H100 fleet.

    python -m tests.fleet_gen DIR                     # writes DIR/<node>.json for the default NVL72 fleet
    python -m tests.fleet_gen --pdsh N > fleet.txt    # N GB200 trays (18 a rack) as pdsh prints their reports

Every report is what `numatune inspect --json` writes for a hand-made tree (tests/handmade_superchips.py's
GB200 compute tray, 4 GPUs, as fixtures/handmade-gb200-numa; fixtures/handmade-dgx-h100-ids for the H100
nodes): one template report per fabric state (healthy, one GPU degraded, registering, sentinel clique) is made
by numatune itself, then each node's copy gets its rack's cluster UUID and clique by text substitution, so a
fleet of thousands costs four inspect runs.
What is made up: every UUID, clique, node name and health mask; the layout (18 trays a rack, 4 GPUs a tray)
follows the GB200 NVL72 (72 GPUs in 18 compute trays); the sentinel clique 32766 shared by unrelated racks
follows meta-pytorch/torchcomms#3612, partial racks of 8, 9 and 16 trays Azure/cyclecloud-slurm#415; the
health mask layout is nvml.h's (numatune/model/nvfabric.py).
"""

from __future__ import annotations

import functools
import sys
import tempfile
from pathlib import Path

TEMPLATE_UUID = "feedfacefeedfacefeedfacefeedface"
TEMPLATE_DASHED = "feedface-feed-face-feed-facefeedface"
TEMPLATE_CLIQUE = 987654  # a number no other field of the report holds
HEALTHY = {"state": 3, "status": 0, "clique_id": TEMPLATE_CLIQUE, "cluster_uuid": TEMPLATE_UUID,
           "health_mask": 0x1AA, "health_summary": 1}
# GPU1 with degraded bandwidth (bits 0-1 = 1, "true") and summary 3 (limited capacity)
DEGRADED = dict(HEALTHY, health_mask=0x1A9, health_summary=3)
# A tray still registering with the fabric manager: no cluster, no clique yet
REGISTERING = {"state": 2, "status": 0, "clique_id": 0, "cluster_uuid": "0" * 32, "health_mask": 0,
               "health_summary": 0}
SENTINEL = 32766
VARIANTS = {"healthy": [HEALTHY] * 4, "degraded": [HEALTHY, DEGRADED, HEALTHY, HEALTHY],
            "registering": [REGISTERING] * 4, "sentinel": [dict(HEALTHY, clique_id=SENTINEL)] * 4}

# The default fleet: (trays, clique, {tray index: variant}); racks 2 and 3 share the sentinel clique 32766
# under different cluster UUIDs; rack 1 has a degraded tray, rack 4 a tray still registering; racks 4-6 are
# partial (16, 9 and 8 trays).
DEFAULT_RACKS = [(18, 1, {5: "degraded"}), (18, 32766, {}), (18, 32766, {}), (16, 2, {3: "registering"}),
                 (9, 3, {}), (8, 4, {})]


def rack_uuid(rack: int) -> str:
    return f"c1a55e{rack:04x}" + "0" * 16 + f"{rack:06x}"


def dashed(hex32: str) -> str:
    return f"{hex32[:8]}-{hex32[8:12]}-{hex32[12:16]}-{hex32[16:20]}-{hex32[20:]}"


def node_name(rack: int, tray: int) -> str:
    return f"gb{rack:02d}{tray:02d}"


def _inspect(root: Path) -> str:
    """`numatune --root ROOT inspect --json`, run in this process (no interpreter start per template)."""
    from click.testing import CliRunner

    from numatune.cli import main as cli_main

    result = CliRunner().invoke(cli_main, ["--root", str(root), "inspect", "--json"], catch_exceptions=False,
                                env={"NUMATUNE_PCI_IDS": "", "NO_COLOR": "1"})
    if result.exit_code not in (0, 1):  # 1: findings
        raise RuntimeError(f"inspect {root}: exit {result.exit_code}: {result.output[-500:]}")
    return result.stdout


FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"


@functools.cache
def template(variant: str) -> str:
    """The inspect report of a GB200 tray in this fabric state (made once per process): the hand-made tray's
    snapshot (fixtures/handmade-gb200-numa, written by tests/handmade_superchips.py) with its NVML record's
    fabric answers replaced, inspected as an archive (no tree of thousands of files is written)."""
    with tempfile.TemporaryDirectory(prefix="numatune-fleet-gen-") as tmp:
        return _inspect(_variant_archive(Path(tmp) / f"gb200-{variant}.tar.gz", variant))


def _variant_archive(out: Path, variant: str) -> Path:
    import io
    import json
    import tarfile

    with tarfile.open(FIXTURES / "handmade-gb200-numa.tar.gz") as src, tarfile.open(out, "w:gz") as dst:
        for member in src:
            data = src.extractfile(member).read() if member.isfile() else None
            if member.name.endswith("numatune/nvml.json"):
                doc = json.loads(data)
                for gpu, fabric in zip(doc["gpus"], VARIANTS[variant], strict=True):
                    gpu["fabric"] = fabric
                data = (json.dumps(doc, indent=1, sort_keys=True) + "\n").encode()
                member.size = len(data)
            dst.addfile(member, io.BytesIO(data) if data is not None else None)
    return out


@functools.cache
def h100_template() -> str:
    """An HGX H100 node without NVML fabric (InfiniBand between nodes only): the dgx-h100 fixture's report."""
    return _inspect(FIXTURES / "handmade-dgx-h100-ids.tar.gz")


def tray_report(rack: int, clique: int, variant: str = "healthy") -> str:
    if clique == SENTINEL and variant == "healthy":
        variant = "sentinel"  # its own template: the report's findings name the sentinel (NT031)
    text = template(variant)
    if variant == "registering":
        return text
    uuid = rack_uuid(rack)
    return (text.replace(TEMPLATE_UUID, uuid).replace(TEMPLATE_DASHED, dashed(uuid))
            .replace(str(TEMPLATE_CLIQUE), str(clique)))


def nvl72_fleet(racks: list[tuple[int, int, dict[int, str]]] | None = None) -> list[tuple[str, str]]:
    """(node name, report text) for every tray of every rack."""
    out = []
    for r, (trays, clique, special) in enumerate(racks or DEFAULT_RACKS, 1):
        for t in range(1, trays + 1):
            out.append((node_name(r, t), tray_report(r, clique, special.get(t, "healthy"))))
    return out


def h100_fleet(nodes: int) -> list[tuple[str, str]]:
    text = h100_template()
    return [(f"h100n{i:03d}", text) for i in range(1, nodes + 1)]


def write_dir(fleet: list[tuple[str, str]], out: Path) -> Path:
    out.mkdir(parents=True, exist_ok=True)
    for name, text in fleet:
        (out / f"{name}.json").write_text(text)
    return out


def pdsh_text(fleet: list[tuple[str, str]]) -> str:
    """The reports as `pdsh -w ... numatune inspect --json` prints them: every line prefixed "host: "."""
    return "".join(f"{name}: {line}\n" for name, text in fleet for line in text.splitlines())


def write_pdsh(stream, trays: int) -> None:  # noqa: ANN001 - a text file
    """TRAYS healthy GB200 trays, 18 a rack (a rack a clique), as pdsh prints them: a report at a time."""
    for i in range(trays):
        rack, tray = divmod(i, 18)
        name = f"gb{rack + 1:04d}{tray + 1:02d}"
        prefix = name + ": "
        stream.write(prefix + tray_report(rack + 1, rack + 1).replace("\n", "\n" + prefix).removesuffix(prefix))


def main(argv: list[str]) -> int:
    if argv[:1] == ["--pdsh"]:
        write_pdsh(sys.stdout, int(argv[1]))
        return 0
    print(write_dir(nvl72_fleet(), Path(argv[0])))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

"""Scheduler configuration files a user hands to `check`: slurm.conf, gres.conf, a kubelet config.

These are the user's input files (like a policy file), read from the local filesystem, not the
node's state, so they do not go through Host. Parsing follows Slurm's own rules where they matter:
keys are case-insensitive, `#` starts a comment, a trailing backslash continues a line, node names
may be hostlist expressions (`gpu[01-04,07]`), `NodeName=DEFAULT` sets defaults for later lines.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from numatune.errors import InputError


def _read(path: str | Path) -> str:
    from numatune.system.infile import read_input

    try:
        return read_input(path, "configuration file").decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(f"cannot read {path}: {exc}") from None


def logical_lines(text: str) -> list[tuple[int, str]]:
    """(first line number, text) with comments stripped and backslash continuations joined."""
    out: list[tuple[int, str]] = []
    pending, start = "", 0
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.split("#", 1)[0].rstrip()
        if not pending:
            start = number
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        line = (pending + line).strip()
        pending = ""
        if line:
            out.append((start, line))
    if pending.strip():
        out.append((start, pending.strip()))
    return out


def parse_pairs(line: str) -> dict[str, str]:
    """`Key=Value Key2=Value2` -> {"key": "Value"} (keys lower-cased, as Slurm matches them)."""
    out = {}
    for token in line.split():
        key, sep, value = token.partition("=")
        if sep:
            out[key.lower()] = value
    return out


MAX_DEFAULT_KEYS = 64  # slurm.conf's node parameters are about 30 (NodeName, CPUs, Sockets, RealMemory, Gres...)


def slurm_node_lines(path: str | Path) -> list[tuple[int, dict[str, str]]]:
    """Every NodeName= line of slurm.conf, with NodeName=DEFAULT values merged in as Slurm does."""
    defaults: dict[str, str] = {}
    out = []
    for number, line in logical_lines(_read(path)):
        pairs = parse_pairs(line)
        if "nodename" not in pairs:
            continue
        if pairs["nodename"].upper() == "DEFAULT":
            defaults.update({k: v for k, v in pairs.items() if k != "nodename"})
            if len(defaults) > MAX_DEFAULT_KEYS:  # each node line copies them: bounded, the work stays linear
                raise InputError(f"{path} line {number}: NodeName=DEFAULT lines set more than {MAX_DEFAULT_KEYS} "
                                 "keys, which no slurm.conf node line has")
            continue
        out.append((number, {**defaults, **pairs}))
    return out


def slurm_node_tokens(path: str | Path) -> dict[int, list[tuple[str, str]]]:
    """line number -> the NodeName line's own `Key=Value` pairs as written (key spelling and order kept, no
    NodeName=DEFAULT values): what a suggested fix line keeps."""
    out = {}
    for number, line in logical_lines(_read(path)):
        pairs = [(k, v) for k, sep, v in (t.partition("=") for t in line.split()) if sep]
        if pairs and pairs[0][0].lower() == "nodename" and pairs[0][1].upper() != "DEFAULT":
            out[number] = pairs
    return out


def slurmd_parameters(path: str | Path) -> set[str]:
    """The SlurmdParameters flags of slurm.conf (numa_node_as_socket, l3cache_as_socket, allow_ecores, ...)."""
    out: set[str] = set()
    for _, line in logical_lines(_read(path)):
        value = parse_pairs(line).get("slurmdparameters")
        if value:
            out.update(v.strip().lower() for v in value.split(",") if v.strip())
    return out


def gres_lines(path: str | Path) -> list[tuple[int, dict[str, str]]]:
    """gres.conf lines with a Name= (AutoDetect= lines become {"autodetect": ...})."""
    out = []
    for number, line in logical_lines(_read(path)):
        pairs = parse_pairs(line)
        if "name" in pairs or "autodetect" in pairs:
            out.append((number, pairs))
    return out


def _load_document(path: str | Path, what: str) -> Any:
    """A JSON or YAML document a user names (YAML through PyYAML, a default dependency imported only here);
    a YAML stream of several documents (`---`) is returned as a list of them."""
    from numatune.system.infile import load_document

    text = _read(path)
    return load_document(text, str(path), "json" if text.lstrip().startswith(("{", "[")) else "yaml")


def load_kubelet_config(path: str | Path) -> dict[str, Any]:
    """A kubelet config file: JSON or YAML."""
    doc = _load_document(path, "kubelet config")
    if not isinstance(doc, dict):
        raise InputError(f"{path} is not a KubeletConfiguration (expected a mapping at the top)")
    kind = doc.get("kind")
    if kind is not None and kind != "KubeletConfiguration":
        raise InputError(f"{path} is a {kind}, not a KubeletConfiguration")
    return doc


def load_resource_slices(path: str | Path) -> list[dict[str, Any]]:
    """Every ResourceSlice in a file: `kubectl get resourceslices -o yaml|json` (a List), one slice, or a YAML
    stream of them. Anything else in a List is left out; a file with no ResourceSlice at all is refused."""
    doc = _load_document(path, "ResourceSlices")
    slices = []
    for item in doc if isinstance(doc, list) else [doc]:
        if not isinstance(item, dict):
            continue
        if item.get("kind") == "ResourceSlice":
            slices.append(item)
        elif str(item.get("kind", "")).endswith("List") and isinstance(item.get("items"), list):
            # kubectl's List: its items carry their kind; a ResourceSliceList's may not
            slices += [i for i in item["items"] if isinstance(i, dict) and i.get("kind", "ResourceSlice")
                       == "ResourceSlice"]
    if not slices:
        raise InputError(f"{path} holds no ResourceSlice",
                         hint="give the output of `kubectl get resourceslices -o yaml`")
    return slices

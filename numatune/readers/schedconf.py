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
from numatune.model.document import Doc


def _read(path: str | Path) -> str:
    """The text of a configuration file: a regular file of at most MAX_CONFIG_BYTES (4 MiB; a cluster's
    slurm.conf is a few hundred KB)."""
    from numatune.system.infile import MAX_CONFIG_BYTES, read_text

    return read_text(path, "configuration file", MAX_CONFIG_BYTES)


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


#: `Key=Value` pairs one line (and NodeName=DEFAULT's, all together) may set: Slurm has ~40 node keys. Bounded, as
#: every NodeName line is merged with the defaults (a default of 500,000 keys copied per line was quadratic).
MAX_PAIRS = 256


def parse_pairs(line: str, where: str = "the Slurm configuration") -> dict[str, str]:
    """`Key=Value Key2=Value2` -> {"key": "Value"} (keys lower-cased, as Slurm matches them); more than MAX_PAIRS
    is InputError naming WHERE."""
    out = {}
    tokens = line.split()
    if len(tokens) > MAX_PAIRS:
        raise InputError(f"{where}: a line of {len(tokens):,} words; Slurm's lines set at most a few dozen keys "
                         f"(numatune reads {MAX_PAIRS})")
    for token in tokens:
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
        pairs = parse_pairs(line, f"{path}:{number}")
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
        parse_pairs(line, f"{path}:{number}")  # the bound
        pairs = [(k, v) for k, sep, v in (t.partition("=") for t in line.split()) if sep]
        if pairs and pairs[0][0].lower() == "nodename" and pairs[0][1].upper() != "DEFAULT":
            out[number] = pairs
    return out


def slurmd_parameters(path: str | Path) -> set[str]:
    """The SlurmdParameters flags of slurm.conf (numa_node_as_socket, l3cache_as_socket, allow_ecores, ...)."""
    out: set[str] = set()
    for number, line in logical_lines(_read(path)):
        value = parse_pairs(line, f"{path}:{number}").get("slurmdparameters")
        if value:
            out.update(v.strip().lower() for v in value.split(",") if v.strip())
    return out


def gres_lines(path: str | Path) -> list[tuple[int, dict[str, str]]]:
    """gres.conf lines with a Name= (AutoDetect= lines become {"autodetect": ...})."""
    out = []
    for number, line in logical_lines(_read(path)):
        pairs = parse_pairs(line, f"{path}:{number}")
        if "name" in pairs or "autodetect" in pairs:
            out.append((number, pairs))
    return out


def _load_document(path: str | Path, what: str) -> Any:
    """A JSON or YAML document a user names (YAML through PyYAML, a default dependency imported only here);
    a YAML stream of several documents (`---`) is returned as a list of them."""
    from numatune.system.infile import load_document

    text = _read(path)
    return load_document(text, str(path), "json" if text.lstrip().startswith(("{", "[")) else "yaml")


def load_kubelet_config(path: str | Path) -> Doc:
    """A kubelet config file (JSON or YAML), read through model.document: each field is checked where
    check_kubelet reads it."""
    doc = _load_document(path, "kubelet config")
    if not isinstance(doc, dict):
        raise InputError(f"{path} is not a KubeletConfiguration (expected a mapping at the top)")
    view = Doc(doc, str(path))
    kind = view.text("kind", default="KubeletConfiguration")
    if kind != "KubeletConfiguration":
        raise InputError(f"{path} is a {kind[:80]}, not a KubeletConfiguration")
    return view


# The devices of every slice of one file, counted before any is read: a 4 MiB `kubectl get resourceslices -o yaml`
# holds about 30,000 real devices (each 130 bytes or more); YAML aliases repeating slices made 2.56 million.
MAX_FILE_DEVICES = 1 << 17


def load_resource_slices(path: str | Path) -> list[dict]:
    """Every ResourceSlice in a file: `kubectl get resourceslices -o yaml|json` (a List), one slice, or a YAML
    stream of them. Anything else in a List is left out; a file with no ResourceSlice at all is refused. The
    structure that check reads (metadata, spec, devices, a device's body, attributes, node names) is typed
    here through model.document, naming the field (exit 3); attribute values stay as published, for the
    checks to judge."""
    doc = _load_document(path, "ResourceSlices")
    where = str(path)
    slices = []
    stream = doc if isinstance(doc, list) else [doc]
    for i, value in enumerate(stream):
        item = Doc(value, where, f"[{i}]" if len(stream) > 1 or isinstance(doc, list) else "")
        if not isinstance(value, dict):
            continue
        kind = item.text("kind")
        if kind == "ResourceSlice":
            slices.append(item)
        elif kind.endswith("List") and isinstance(value.get("items"), list):
            # kubectl's List: its items carry their kind; a ResourceSliceList's may not
            slices += [i for i in item.list("items") if isinstance(i.value, dict)
                       and i.text("kind", default="ResourceSlice") == "ResourceSlice"]
    if not slices:
        raise InputError(f"{path} holds no ResourceSlice",
                         hint="give the output of `kubectl get resourceslices -o yaml`")
    listed = sum(len(devices) for s in slices if isinstance(spec := s.value.get("spec"), dict)
                 and isinstance(devices := spec.get("devices"), list))  # counted before any device is read
    if listed > MAX_FILE_DEVICES:
        raise InputError(f"{path}: its ResourceSlices list {listed:,} devices; numatune reads at most "
                         f"{MAX_FILE_DEVICES:,} in one file (YAML aliases can repeat a slice without end)",
                         hint="give the slices of the node being checked (kubectl get resourceslices "
                         "--field-selector spec.nodeName=NODE -o yaml)")
    for s in slices:
        s.mapping("metadata").text("name", default="?")
        spec = s.mapping("spec")
        spec.text("nodeName", default="")
        for d in spec.list("devices"):
            body = d.mapping("basic") if d.mapping().at("basic").present else d
            body.mapping("attributes")
            body.text("nodeName", default="")
    return [s.value for s in slices]


def node_selection_fields(path: str | Path, slice_doc: dict) -> None:
    """How one ResourceSlice selects its nodes, typed (exit 3 naming the field): spec.allNodes and spec.nodeSelector,
    each device's with spec.perDeviceNodeSelection; the selector's terms and requirements as core/v1 writes
    them. check evaluates them only after this."""
    spec = Doc(slice_doc, str(path)).mapping("spec")
    bodies = [spec]
    if spec.bool("perDeviceNodeSelection", default=False):
        bodies += [d.mapping("basic") if d.mapping().at("basic").present else d for d in spec.list("devices")]
    for body in bodies:
        body.bool("allNodes", default=False)
        for term in body.mapping("nodeSelector").list("nodeSelectorTerms"):
            for key in ("matchExpressions", "matchFields"):
                for req in term.mapping().list(key):
                    req.mapping().text("key")
                    req.text("operator")
                    req.strs("values")

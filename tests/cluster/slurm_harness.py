"""A real slurmctld (Debian trixie's Slurm 24.11, topology/block) reading a topology.conf: what it loaded, or why not.

Slurm 24.11 reads topology.conf only (topology.yaml came with 25.05). The daemon runs in the chroot that
scripts/slurm-chroot.sh builds (the host's Debian 12 Slurm 22.05 has no topology/block). `load_topology(text,
nodes, jobs)` writes a minimal slurm.conf beside the topology: TopologyPlugin=topology/block; one NodeName line per
node in State=CLOUD, powered down, so that no slurmd is needed and the scheduler still allocates them; the
controller on 127.0.0.1 at a free port; auth/slurm with a fresh key (no munged); state and logs in a directory of
its own. It starts `slurmctld -D -i` in a process group of its own, waits until `scontrol ping` answers, reads
`scontrol show topology`, places the jobs asked (`sbatch`, then `squeue`'s node list) and stops the daemon. Node
lists are expanded by Slurm itself (`scontrol show hostnames`), never by numatune's hostlist reader.

A configuration slurmctld refuses raises `SlurmRefused` carrying slurmctld's own error lines (its log and stderr),
so a test fails with Slurm's words. Every wait has a hard limit; the daemon's process group is killed on the way
out whatever happened, and its mount namespace ends with it.
"""

from __future__ import annotations

import contextlib
import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

PROJECT = Path(__file__).resolve().parents[2]
SCRIPT = PROJECT / "scripts" / "slurm-chroot.sh"
CHROOT = Path(os.environ.get("NUMATUNE_SLURM_CHROOT", "/var/cache/numatune/trixie-slurm"))
START_TIMEOUT = 60.0  # slurmctld answers `scontrol ping` within ~2 s on the 2-core machine; the rest is margin
COMMAND_TIMEOUT = 30.0


ERROR_LINE = re.compile(r"\b(error|fatal): .*")
#: What slurmctld -i says on every start in a fresh state directory: not about the configuration.
# Notes of a start on an empty state directory, and the TCP keepalive option a socket of this sandbox's network
# namespace refuses (said now and then as a job is placed: nothing of the topology)
BENIGN = re.compile(r"Could not open \w+ state file|NOTE: Trying backup state save file"
                    r"|Unable to set keepalive interval: Operation not supported")


class SlurmRefused(Exception):
    """slurmctld would not run this configuration: the message is slurmctld's own error lines."""


class HarnessError(Exception):
    """The harness itself failed (a command timed out, an answer it cannot read): not Slurm's verdict."""


@dataclass
class Topology:
    """What the running slurmctld reports.

    blocks: each base block's nodes as Slurm holds them: `scontrol show topology` echoes each block's Nodes= as
    written, even naming a node slurm.conf lacks (slurmctld drops it, logging "_find_node_record: lookup failure",
    which lands in errors), so a block's nodes are those of its Nodes= that slurm.conf declares; and the first
    and last node of every block and every node in none are asked one by one (`scontrol show topology NODE`
    answers from the controller's own tables), a disagreement landing in errors too. sizes: each block's
    BlockSize as Slurm computed it (the largest BlockSizes level the block holds: 16 for 18 nodes under
    BlockSizes=16,32). aggregated: the blocks Slurm
    builds from the higher BlockSizes levels (AggregatedBlock=), each with its nodes. declared: the file's own blocks,
    expanded by Slurm. unblocked: the declared nodes in no block. errors: slurmctld's error lines beyond the
    start-up notes of an empty state directory. placed: for each job asked (its sbatch options, joined by spaces),
    the nodes slurmctld allocated it."""

    blocks: dict[str, list[str]] = field(default_factory=dict)
    sizes: dict[str, int] = field(default_factory=dict)
    aggregated: dict[str, list[str]] = field(default_factory=dict)
    declared: dict[str, list[str]] = field(default_factory=dict)
    unblocked: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    placed: dict[str, list[str]] = field(default_factory=dict)  # each job's sbatch options -> its nodes
    raw: str = ""
    version: str = ""


def missing() -> str | None:
    """Why the harness cannot run here, or None."""
    if os.geteuid() != 0:
        return "the Slurm 24.11 chroot needs root (unshare, mount, chroot)"
    if shutil.which("unshare") is None:
        return "unshare (util-linux) is not installed"
    if not (CHROOT / ".numatune-stamp").is_file():
        return f"no Slurm 24.11 chroot in {CHROOT}: `bash scripts/slurm-chroot.sh` builds it (~3 min, once)"
    if not (CHROOT / "usr/sbin/slurmctld").exists():
        return f"{CHROOT} has no slurmctld: rebuild it with `bash scripts/slurm-chroot.sh`"
    return None


def parse_topology_conf(text: str) -> tuple[dict[str, str], list[str]]:
    """topology.conf for topology/block as Slurm reads it: {BlockName: Nodes expression} and BlockSizes (as
    written). Comments (`#` to the end of the line) are dropped; keys are case-insensitive."""
    blocks: dict[str, str] = {}
    sizes: list[str] = []
    for raw in text.splitlines():
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        pairs = dict((k.lower(), v) for k, _, v in (word.partition("=") for word in line.split()))
        if "blockname" in pairs:
            blocks[pairs["blockname"]] = pairs.get("nodes", "")
        if "blocksizes" in pairs:
            sizes = [s for s in pairs["blocksizes"].split(",") if s]
    return blocks, sizes


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class _Controller:
    """One slurmctld in the chroot, with its work directory under the chroot's /run."""

    def __init__(self, topology: str, nodes: list[str]) -> None:
        (CHROOT / "run").mkdir(exist_ok=True)
        self.host_dir = Path(tempfile.mkdtemp(prefix="numatune-slurm-", dir=CHROOT / "run"))
        self.dir = "/run/" + self.host_dir.name  # the same directory seen from inside the chroot
        self.conf = f"{self.dir}/slurm.conf"
        self.proc: subprocess.Popen[bytes] | None = None
        self.stderr = self.host_dir / "slurmctld.stderr"
        (self.host_dir / "state").mkdir()
        (self.host_dir / "run").mkdir()
        (CHROOT / "run" / "slurmctld").mkdir(exist_ok=True)
        (self.host_dir / "topology.conf").write_text(topology)
        key = self.host_dir / "slurm.key"
        key.write_bytes(secrets.token_bytes(1024))
        key.chmod(0o600)
        port = _free_port()
        lines = [
            "ClusterName=numatune",
            f"SlurmctldHost={socket.gethostname().split('.')[0]}(127.0.0.1)",
            f"SlurmctldPort={port}",
            "AuthType=auth/slurm",
            "CredType=cred/slurm",
            "SlurmUser=root",
            f"StateSaveLocation={self.dir}/state",
            f"SlurmctldPidFile={self.dir}/slurmctld.pid",
            f"SlurmctldLogFile={self.dir}/slurmctld.log",
            "SlurmctldDebug=info",
            "MailProg=/bin/true",
            "TopologyPlugin=topology/block",
            "SelectType=select/cons_tres",
            "SchedulerType=sched/builtin",
            "ProctrackType=proctrack/linuxproc",
            "TaskPlugin=task/none",
            "JobAcctGatherType=jobacct_gather/none",
            "AccountingStorageType=accounting_storage/none",
            "MpiDefault=none",
            "ReturnToService=2",
            # CLOUD nodes, powered down: no slurmd needed, yet the scheduler allocates them (a job then waits in
            # CONFIGURING for a resume that /bin/true never completes), so where Slurm places a job can be read
            "SuspendProgram=/bin/true",
            "ResumeProgram=/bin/true",
            "SuspendTime=600",
            "ResumeTimeout=600",
            *(f"NodeName={n} CPUs=1 State=CLOUD" for n in nodes),
            "PartitionName=all Nodes=ALL Default=YES State=UP MaxTime=INFINITE",
            "",
        ]
        (self.host_dir / "slurm.conf").write_text("\n".join(lines))

    def chrooted(self, *argv: str) -> list[str]:
        """ARGV in the chroot, with this controller's own /run/slurmctld: slurmctld 24.11 serves auth/slurm's
        credentials on /run/slurmctld/sack.socket and scontrol asks there first, so two controllers at once (two
        checkouts' test runs) would otherwise sign each other's requests. Each `run` is a mount namespace of its
        own: the bind is made in every one, daemon's and client's alike."""
        bind = 'mount --bind "$0" /run/slurmctld && exec "$@"'
        return ["bash", str(SCRIPT), "run", "sh", "-c", bind, f"{self.dir}/run", *argv]

    def run(self, *argv: str, timeout: float = COMMAND_TIMEOUT) -> subprocess.CompletedProcess[str]:
        """A client command in the chroot, against this controller's slurm.conf."""
        cmd = self.chrooted("env", f"SLURM_CONF={self.conf}", *argv)
        proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True, start_new_session=True)
        try:
            out, err = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired as e:
            _signal_group(proc.pid, signal.SIGKILL)  # the wrapper and the client it runs, not only the wrapper
            proc.communicate()
            raise HarnessError(f"`{' '.join(argv)}` did not answer in {timeout:.0f} s") from e
        return subprocess.CompletedProcess(cmd, proc.returncode, out, err)

    def start(self) -> None:
        with open(self.stderr, "wb") as err:
            self.proc = subprocess.Popen(self.chrooted("slurmctld", "-D", "-i", "-f", self.conf),
                                         stdin=subprocess.DEVNULL, stdout=err, stderr=subprocess.STDOUT,
                                         start_new_session=True)

    def said(self) -> str:
        """slurmctld's log (what it wrote before it could open its log file is on its stderr)."""
        text = ""
        for f in (self.host_dir / "slurmctld.log", self.stderr):
            with contextlib.suppress(OSError):
                text += f.read_text(errors="replace")
        return text

    def error_lines(self) -> list[str]:
        """slurmctld's own error and fatal lines, each once (the log's and stderr's copies are the same words),
        without the notes every start on an empty state directory writes."""
        seen: dict[str, None] = {}
        for line in self.said().splitlines():
            words = ERROR_LINE.search(line)
            if words and not BENIGN.search(words.group(0)):
                seen.setdefault(words.group(0), None)
        return list(seen)

    def errors(self) -> str:
        return "\n".join(self.error_lines()) or self.said()[-2000:] or "(slurmctld said nothing)"

    def wait_ready(self, timeout: float = START_TIMEOUT) -> None:
        assert self.proc is not None
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise SlurmRefused(f"slurmctld exited {self.proc.returncode}:\n{self.errors()}")
            ping = self.run("scontrol", "ping", timeout=max(1.0, min(COMMAND_TIMEOUT, deadline - time.monotonic())))
            if re.search(r"is UP", ping.stdout):
                return
            time.sleep(0.3)
        raise SlurmRefused(f"slurmctld did not answer `scontrol ping` in {timeout:.0f} s:\n{self.errors()}")

    def stop(self) -> None:
        """SIGTERM to the daemon's process group (the wrapper, slurmctld, slurmscriptd), SIGKILL to what is left
        after 15 s; returns once the group is empty (slurmctld writes its state on the way out), then removes the
        work directory."""
        if self.proc is not None:
            for sig, wait in ((signal.SIGTERM, 15.0), (signal.SIGKILL, 10.0)):
                if not _signal_group(self.proc.pid, sig):
                    break
                deadline = time.monotonic() + wait
                while time.monotonic() < deadline and _signal_group(self.proc.pid, 0):
                    with contextlib.suppress(subprocess.TimeoutExpired):
                        self.proc.wait(timeout=0.1)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(timeout=5)
        shutil.rmtree(self.host_dir, ignore_errors=True)


def _signal_group(pgid: int, sig: int) -> bool:
    """Send SIG to the process group; False once no process is left in it."""
    try:
        os.killpg(pgid, sig)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


@contextlib.contextmanager
def controller(topology: str, nodes: Iterable[str]) -> Iterator[_Controller]:
    """A running slurmctld with this topology.conf and these nodes; stopped and removed on the way out."""
    reason = missing()
    if reason:
        raise HarnessError(reason)
    ctl = _Controller(topology, list(nodes))
    try:
        ctl.start()
        ctl.wait_ready()
        yield ctl
    finally:
        ctl.stop()


def _batch(ctl: _Controller, script: str, args: list[str], chunk: int = 400) -> str:
    """A shell loop over ARGS in one chroot start per CHUNK arguments (each start is an unshare and a chroot)."""
    out = []
    for i in range(0, len(args), chunk):
        part = args[i:i + chunk]
        res = ctl.run("sh", "-c", script, "sh", *part, timeout=COMMAND_TIMEOUT + 0.5 * len(part))
        if res.returncode != 0:
            raise HarnessError(f"scontrol in the chroot exited {res.returncode}: {res.stderr.strip()[-500:]}")
        out.append(res.stdout)
    return "".join(out)


def _sections(text: str) -> dict[str, str]:
    """Output of a _batch loop that prints `@@ ARG` before each answer, as {ARG: answer}."""
    found: dict[str, str] = {}
    key = None
    for line in text.splitlines():
        if line.startswith("@@ "):
            key = line[3:]
            found[key] = ""
        elif key is not None:
            found[key] += line + "\n"
    return found


def hostnames(ctl: _Controller, exprs: list[str]) -> dict[str, list[str]]:
    """Hostlist expressions expanded by Slurm (`scontrol show hostnames`)."""
    wanted = [e for e in dict.fromkeys(exprs) if e]
    text = _batch(ctl, 'for e; do echo "@@ $e"; scontrol show hostnames "$e" || exit 1; done', wanted)
    return {**{e: [] for e in exprs}, **{e: out.split() for e, out in _sections(text).items()}}


def parse_show_topology(text: str) -> list[dict[str, str]]:
    """`scontrol show topology` as records: one per line, KEY=VALUE words (BlockName= for a base block,
    AggregatedBlock= for one Slurm builds from a higher BlockSizes level; then BlockIndex, Nodes, BlockSize)."""
    records = []
    for line in text.splitlines():
        words = line.split()
        if words:
            records.append({k: v for k, _, v in (w.partition("=") for w in words)})
    return records


def declared_nodes(topology: str) -> list[str]:
    """Every node the blocks of a topology.conf name, once each (for slurm.conf's NodeName lines only: what Slurm
    then holds is read back from Slurm)."""
    from numatune.plan.slurm import expand_hostlist

    blocks, _ = parse_topology_conf(topology)
    return list(dict.fromkeys(n for expr in blocks.values() if expr for n in expand_hostlist(expr)))


def place(ctl: _Controller, jobs: list[list[str]], timeout: float = START_TIMEOUT) -> dict[str, list[str]]:
    """Submit each job (`sbatch OPTIONS --wrap true`, in order) and return the nodes slurmctld allocates it,
    expanded by Slurm. A job still pending when the time is up has no nodes: its reason is in the message."""
    ids: dict[str, str] = {}
    for options in jobs:
        out = ctl.run("sbatch", "--parsable", *options, "--wrap", "true")
        if out.returncode != 0:
            raise HarnessError(f"sbatch {' '.join(options)}: {out.stderr.strip()}")
        ids[out.stdout.strip().split(";")[0]] = " ".join(options)
    deadline = time.monotonic() + timeout
    while True:
        queue = ctl.run("squeue", "-h", "-o", "%i|%T|%N|%r").stdout
        rows = {i: (state, nodes, reason) for i, state, nodes, reason in
                (line.split("|", 3) for line in queue.splitlines() if line.count("|") == 3)}
        if all(rows.get(i, ("", "", ""))[1] for i in ids) or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    waiting = [f"{ids[i]}: {rows.get(i, ('gone', '', ''))}" for i in ids if not rows.get(i, ("", "", ""))[1]]
    if waiting:
        raise HarnessError(f"jobs not placed in {timeout:.0f} s: {'; '.join(waiting)}\n{ctl.errors()}")
    lists = hostnames(ctl, [rows[i][1] for i in ids])
    return {ids[i]: lists[rows[i][1]] for i in ids}


def load_topology(topology: str, nodes: Iterable[str] | None = None, jobs: list[list[str]] | None = None) -> Topology:
    """Start slurmctld on this topology.conf (text) and return what it holds. `nodes`: the node names slurm.conf
    declares (hostlist expressions allowed), by default every node the file's blocks name; `jobs`: sbatch options
    of jobs to place once it runs (Topology.placed). Raises SlurmRefused with slurmctld's own message when it
    will not run the configuration."""
    blocks, _ = parse_topology_conf(topology)
    names = list(nodes) if nodes is not None else declared_nodes(topology)
    with controller(topology, names) as ctl:
        out = ctl.run("scontrol", "show", "topology")
        if out.returncode != 0:
            raise SlurmRefused(f"scontrol show topology exited {out.returncode}: {out.stderr.strip()}\n{ctl.errors()}")
        result = Topology(raw=out.stdout, version=ctl.run("scontrol", "--version").stdout.strip())
        records = parse_show_topology(out.stdout)
        expanded = hostnames(ctl, [*blocks.values(), *names, *(r.get("Nodes", "") for r in records)])
        result.declared = {name: expanded[expr] for name, expr in blocks.items()}
        known = list(dict.fromkeys(n for expr in names for n in expanded[expr]))  # what slurm.conf declares
        declared = set(known)
        for rec in records:
            if "BlockName" in rec:
                result.blocks[rec["BlockName"]] = [n for n in expanded[rec.get("Nodes", "")] if n in declared]
                result.sizes[rec["BlockName"]] = int(rec.get("BlockSize", "0"))
            elif "AggregatedBlock" in rec:
                result.aggregated[rec["AggregatedBlock"]] = expanded[rec.get("Nodes", "")]
        placed = {n: name for name, members in result.blocks.items() for n in members}
        result.unblocked = [n for n in known if n not in placed]
        # The controller's own tables, node by node, for the ends of every block and every node in none (each
        # query is one RPC, and slurmctld 24.11 sometimes holds a burst of connections for 5 s: not all nodes)
        ask = [*(n for members in result.blocks.values() for n in {members[0]: 0, members[-1]: 0} if members),
               *result.unblocked]
        answers = _sections(_batch(ctl, 'for n; do echo "@@ $n"; scontrol show topology "$n" 2>/dev/null; done',
                                   ask))
        mismatch = []
        for node in ask:
            said = [r["BlockName"] for r in parse_show_topology(answers.get(node, "")) if "BlockName" in r]
            if said != ([placed[node]] if node in placed else []):
                mismatch.append(f"harness: `scontrol show topology {node}` names blocks {said}, the block list "
                                f"{[placed[node]] if node in placed else []}")
        result.placed = place(ctl, jobs or [])
        result.errors = ctl.error_lines() + mismatch
    return result

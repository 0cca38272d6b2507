"""The typed model: immutable `@record`s (numatune.model._record) that readers fill and analysis/render consume.

Three record mechanisms, each where it is used. `@record` (a tuple subclass with namedtuple's API,
defined at import far faster than a frozen dataclass or a namedtuple, no `typing`) for the model that
the report paths build (topology, findings, process, irq, launch, check) and for plan/analysis results
on those paths. `typing.NamedTuple` where start-up does not count and the process runs for seconds:
probe's measurements (model/probe.py), compare's runs (model/compare.py), the placement library
(placement/), the measurement loops (measure/bench.py), statistics (analysis/stats.py), the memory plan
(plan/memory.py) and compare's placements (commands/compare.py). `dataclasses.dataclass` for fleet's
groups (analysis/fleet.py), its NVLink domains (model/nvfleet.py) and the cluster configuration written from
them (plan/cluster.py), and snapshot's capture (commands/snapshot.py). tests/test_record.py keeps
this paragraph true.

Sub-modules by subject: topology (CPUs, nodes, PCI devices, CXL, kernel settings) and findings.
Commands add their own modules (process, irq, launch) beside these.
"""

"""The typed model: immutable `@record`s (numatune.model._record) that readers fill and analysis/render consume.

One record mechanism for the whole model (and for plan/analysis results): `@record`, a tuple subclass
with namedtuple's API, which defines at import far faster than a frozen dataclass (or a namedtuple)
and needs no `typing`.

Sub-modules by subject: topology (CPUs, nodes, PCI devices, CXL, kernel settings) and findings.
Commands add their own modules (process, irq, launch) beside these.
"""

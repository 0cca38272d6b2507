"""The typed model: plain dataclasses that readers fill and analysis/render consume.

Sub-modules by subject: topology (CPUs, nodes, PCI devices, CXL, kernel settings) and findings.
Commands add their own modules (process, irq, launch) beside these.
"""

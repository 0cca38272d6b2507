"""Readers: Host -> model. Each module owns one subsystem; `read_topology` assembles them.

Pure `parse_*` functions take text; `read_*` functions take a Host. No reader imports click, rich,
psutil, pyudev or py-cpuinfo: those only enrich live runs, from `numatune.live`.
"""

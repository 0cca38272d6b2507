"""Live execution on this node: binding and exec (`bind`), the one writer of IRQ state (`irq_apply`),
and what only the live node tells (`enrich`: py-cpuinfo, pyudev)."""

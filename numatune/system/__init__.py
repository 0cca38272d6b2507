"""Access to the system: reading a root (`host`), the memory-policy syscalls (`memsys`), the live
node's extras (`live`), binding and exec (`bind`) and the one writer of IRQ state (`irq_apply`)."""

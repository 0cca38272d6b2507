"""Access to the system: reading a root, live or saved (`host`), and the NUMA memory-policy syscalls
(`memsys`). Nothing here knows a command; everything that reads or calls the kernel goes through it."""

"""Access to the system: reading a root, live or saved (`host`), what a saved root is made of (an
archive read into memory, `tarindex`; a directory opened beneath one handle, `rootdir`), the one writer
of output files (`outfile`), and the NUMA memory-policy syscalls (`memsys`). Nothing here knows a
command; everything that reads or calls the kernel goes through it."""

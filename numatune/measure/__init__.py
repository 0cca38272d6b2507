"""Live measurements of the memory system (numatune probe): a compiled chase helper, buffers placed on a
node, pinned threads. Nothing here runs on a saved root."""

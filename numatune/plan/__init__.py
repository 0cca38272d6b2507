"""Pure planning functions: model in, decisions out (no reads, no writes, no syscalls)."""

"""Analysis: pure functions over the model (no I/O, no click, no rich)."""

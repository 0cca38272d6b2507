"""One module per command: its use case, read → analyse/plan → render, called by `numatune.cli`
(which only parses options) and by the click-free start in `numatune.entry`."""

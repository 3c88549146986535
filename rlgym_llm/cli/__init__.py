"""The `rlgym` command: the composition root, and the only module allowed to import every room."""

"""`rlgym/SWE-v0`: fix bugs in small Python repositories inside a sandbox (see `rlgym_envs.swe.env`)."""

"""Built-in environment families of rlgym-llm. Reached through the registry, never imported by the library."""

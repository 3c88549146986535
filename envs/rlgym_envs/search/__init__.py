"""`rlgym/Search-v0`: multi-hop question answering with search and open tools over a BM25 index.

Modules: `world` (seeded fictional world and its questions), `corpus` (records, JSONL loaders, answer
scoring), `index` (BM25 with disk and in-process caches), `env` (`SearchEnv`).
"""

"""Envs as services: any registered env served over OpenEnv's protocol, and remote envs as envs.

    rlgym serve rlgym/Search-v0 --port 8000              # server (rlgym_llm.serve.server, openenv-core)
    env = rlgym_llm.make("rlgym/Remote-v0", url="ws://127.0.0.1:8000")   # client (rlgym_llm.serve.remote)

Importing this package loads nothing heavy: the server needs the `serve` extra (openenv-core,
FastAPI, uvicorn), the client only `websockets`. `rlgym_llm.serve.wire` holds the JSON shapes both
sides agree on (docs/interop.md).
"""

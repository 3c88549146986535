"""`rlgym serve ENV_ID [key=value ...]`: serve a registered env as an OpenEnv environment.

    rlgym serve rlgym/Search-v0 --port 8000                   # the shipped Search env
    rlgym serve rlgym/Code-v0 sandbox_backend=docker --max-sessions 32 --idle-timeout 120
    rlgym serve my_envs:EchoEnv --token-env MY_TOKEN          # your own env; clients need the token

The first line printed says where it listens. Exit status: 0 after an interrupt, 1 when the server
could not start (a bad keyword, a port in use), 2 for usage errors.
"""

from __future__ import annotations

import argparse
import os
import sys


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The `serve` flags."""
    p.add_argument("env_id", help="a registered id (rlgym/Search-v0), or module:Class of your own env")
    p.add_argument("kwargs", nargs="*", metavar="key=value", help="the env's constructor keywords (values as YAML)")
    p.add_argument("--module", help="import this module first; it registers its envs (e.g. my_envs)")
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (default: 127.0.0.1, this machine only)")
    p.add_argument("--port", type=int, default=8000, help="port (default: 8000; 0 picks a free one)")
    p.add_argument("--max-turns", type=int, default=None, metavar="N", help="turn limit (default: the registration's)")
    p.add_argument("--max-sessions", type=int, default=64, metavar="N", help="concurrent sessions (default: 64)")
    p.add_argument(
        "--idle-timeout", type=float, default=300.0, metavar="S", help="close a session idle this long (default: 300)"
    )
    p.add_argument(
        "--max-request-bytes", type=int, default=1 << 20, metavar="B", help="largest request (default: 1 MiB)"
    )
    p.add_argument(
        "--token-env",
        metavar="VAR",
        help="require `Authorization: Bearer <token>`, the token read from this environment variable",
    )
    p.add_argument(
        "--expose-task",
        action="store_true",
        help="share each task (ground truth included) in `state`, for trainers that need it (IGPO, oracles)",
    )
    p.add_argument("--log-level", default="warning", help="uvicorn's log level (default: warning)")


def run(args: argparse.Namespace) -> int:
    """Serve until interrupted; returns the exit status."""
    from rlgym_llm.core.errors import ConfigError, RlgymError, UnknownEnvError
    from rlgym_llm.recipes.serve import serve

    token = None
    if args.token_env:
        token = os.environ.get(args.token_env)
        if not token:
            print(f"error: --token-env {args.token_env}: that environment variable is empty or unset", file=sys.stderr)
            return 2
    try:
        serve(
            args.env_id,
            args.kwargs,
            module=args.module,
            host=args.host,
            port=args.port,
            log_level=args.log_level,
            max_turns=args.max_turns,
            max_sessions=args.max_sessions,
            idle_timeout_s=args.idle_timeout if args.idle_timeout > 0 else None,
            max_request_bytes=args.max_request_bytes,
            token=token,
            expose_task=args.expose_task,
        )
    except UnknownEnvError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except (ConfigError, ValueError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except (RlgymError, ImportError, OSError) as e:
        print(f"error: {type(e).__name__}: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        pass
    return 0

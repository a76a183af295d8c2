"""The ``oncegate`` command."""

from __future__ import annotations

import argparse
import importlib
import logging
import sys
from pathlib import Path

from oncegate import __version__


def _load_app(app_dir: Path) -> object:
    # function_app.py sits at the project root (where Core Tools expects it), not in the package.
    sys.path.insert(0, str(app_dir.resolve()))
    return importlib.import_module("function_app").app


def serve(args: argparse.Namespace) -> int:
    from oncegate.config import ConfigError
    from oncegate.entrypoints.server import make_server

    try:
        app = _load_app(Path(args.app_dir))
    except ConfigError:
        return 2
    server = make_server(app, args.host, args.port)  # type: ignore[arg-type]
    host, port = server.server_address[:2]
    print(f"OnceGate {__version__} serving on http://{host!s}:{port}/api (Ctrl+C to stop)", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="oncegate", description=__doc__)
    parser.add_argument("--version", action="version", version=f"oncegate {__version__}")
    commands = parser.add_subparsers(dest="command", required=True)
    serve_parser = commands.add_parser("serve", help="serve the Functions app locally, as Core Tools would")
    serve_parser.add_argument("--host", default="127.0.0.1")
    serve_parser.add_argument("--port", type=int, default=7071)
    serve_parser.add_argument("--app-dir", default=".", help="the folder holding function_app.py")
    serve_parser.set_defaults(handler=serve)
    return parser


def main(argv: list[str] | None = None) -> int:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    args = build_parser().parse_args(argv)
    code: int = args.handler(args)
    return code


if __name__ == "__main__":
    sys.exit(main())

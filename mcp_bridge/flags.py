"""The flags of `ragd mcp` and `ragd-mcp` (one definition for both; imports nothing)."""

from __future__ import annotations

import argparse


def add_http_flags(parser: argparse.ArgumentParser) -> None:
    """``--http`` and what goes with it (decision 0052)."""
    parser.add_argument("--http", action="store_true",
                        help="serve MCP over Streamable HTTP at http://BIND:PORT/mcp instead "
                        "of stdio; every request needs `Authorization: Bearer TOKEN` (`ragd "
                        "secret show mcp.http_token`, or RAGD_MCP_HTTP_TOKEN)")
    parser.add_argument("--port", type=int, default=None,
                        help="with --http: the port (default: [http] port, 8766; 0: any free "
                        "one)")
    parser.add_argument("--bind", default=None,
                        help="with --http: the address to listen on (default: [http] bind, "
                        "127.0.0.1); any other than loopback reaches the network")
    parser.add_argument("--new-token", action="store_true",
                        help="with --http: replace the stored token with a new one first")

"""Who may use the window: the checks every request passes, kept apart from the server.

The page is served on loopback only, yet any web page the person visits can make their browser
send requests to 127.0.0.1, and a DNS-rebinding page can do it under a name of its own. So:

- a random token per daemon start; the URL that opens the window carries it once, the server
  trades it for a cookie (HttpOnly, SameSite=Strict, path /) and redirects to a URL without it;
  every later request must carry the cookie;
- the ``Host`` header must name the loopback address and the port (a rebinding page's requests
  carry its own name);
- a request that changes anything is a POST whose ``Origin`` is the page's own (a foreign
  page's POST carries its origin, and SameSite=Strict keeps the cookie from it anyway);
- no CORS headers, and a Content-Security-Policy without inline scripts or styles.
"""

from __future__ import annotations

import hmac
import secrets

LOOPBACK_NAMES = ("127.0.0.1", "localhost")
TOKEN_PARAM = "token"

CSP = ("default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
       "connect-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'")
HEADERS = {
    "Content-Security-Policy": CSP,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",  # the opening URL carries the token
    "X-Frame-Options": "DENY",
    "Cache-Control": "no-store",
    "Cross-Origin-Opener-Policy": "same-origin",
    "Cross-Origin-Resource-Policy": "same-origin",
}


def new_token() -> str:
    return secrets.token_urlsafe(32)


def cookie_name(port: int) -> str:
    """One cookie per port: cookies ignore ports, and two daemons (two homes) may run."""
    return f"ragd_{port}"


def host_ok(host: str | None, port: int) -> bool:
    """Whether ``Host`` names this server on loopback (``127.0.0.1:port``, ``localhost:port``)."""
    return host is not None and host.lower() in {f"{n}:{port}" for n in LOOPBACK_NAMES}


def origin_ok(origin: str | None, port: int) -> bool:
    """Whether ``Origin`` is the page's own. A missing one is refused: browsers send it on
    every POST, and only a POST changes anything."""
    return origin is not None and origin.lower() in {f"http://{n}:{port}" for n in LOOPBACK_NAMES}


def token_ok(given: str | None, token: str) -> bool:
    return bool(given) and hmac.compare_digest(str(given).encode(), token.encode())


def set_cookie(name: str, token: str) -> str:
    """The ``Set-Cookie`` value that carries the session: script-proof, never sent cross-site,
    gone when the browser closes (the token changes at each daemon start anyway)."""
    return f"{name}={token}; HttpOnly; SameSite=Strict; Path=/"


def verdict(*, method: str, path: str, host: str | None, origin: str | None,
            cookie: str | None, query_token: str | None, token: str, port: int
            ) -> tuple[int, str]:
    """(status, reason) for a request: 0 to serve it, 1 to trade the query's token for a
    cookie (and redirect to the page), else the HTTP status to refuse it with and why."""
    if not host_ok(host, port):
        return 403, "the Host header does not name ragd's address (127.0.0.1 or localhost)"
    if method not in ("GET", "HEAD", "POST"):
        return 405, f"{method} is not served"
    if method == "GET" and path == "/" and query_token is not None:
        if token_ok(query_token, token):
            return 1, "open"
        return 401, "the link's token is not this ragd's (it changes each time ragd starts)"
    if not token_ok(cookie, token):
        return 401, "no valid session"
    if method == "POST" and not origin_ok(origin, port):
        return 403, "a change must come from ragd's own page (the Origin header)"
    return 0, ""

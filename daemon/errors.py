"""Every error ragd reports to a person, in one place.

Each carries a message (what went wrong) and a hint (what to do). The edges translate them
once: the CLI prints both and exits non-zero, the MCP bridge returns a tool error, the tray
changes state.
"""

from __future__ import annotations


class RagdError(Exception):
    """Base class: an expected failure with an actionable hint."""

    code = "error"

    def __init__(self, message: str, hint: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint

    def __str__(self) -> str:
        return f"{self.message} ({self.hint})" if self.hint else self.message


class ConfigError(RagdError):
    code = "config"


class InvalidArgument(RagdError):
    """A request parameter is wrong; ``param`` names it."""

    code = "invalid_argument"

    def __init__(self, param: str, message: str, hint: str = "") -> None:
        super().__init__(f"{param}: {message}", hint)
        self.param = param


class NotFound(RagdError):
    code = "not_found"


class PathRefused(InvalidArgument):
    """A path a request may not read, or that names nothing readable: ``code`` says which
    (``outside_reach``, ``hidden_path``, ``ragd_data``, ``system_file``, ``not_found``,
    ``not_regular``, ``unreadable``, ``unsupported``, ``nul_in_path``, ...), so a client can
    tell a refusal from a typo without parsing the sentence."""

    code = "path_refused"

    def __init__(self, param: str, message: str, hint: str = "", *, code: str | None = None
                 ) -> None:
        super().__init__(param, message, hint)
        if code:
            self.code = code


class IndexFailed(RagdError):
    """An explicit index request ended on an unexpected error: the reply says what ``ragd
    status`` lists, instead of an internal error."""

    code = "index_failed"


class IndexMismatch(RagdError):
    """The stored indexes were built with another embedding fingerprint."""

    code = "index_mismatch"


class DaemonUnavailable(RagdError):
    code = "daemon_unavailable"


class DaemonStartFailed(DaemonUnavailable):
    """The daemon started for a client exited at start-up and said why (a bad config): no
    other client's daemon is coming, so waiting longer would only delay the answer."""

    code = "daemon_start_failed"


class ProtocolMismatch(RagdError):
    code = "protocol_mismatch"


class AccessDenied(RagdError):
    """A connection that did not show the daemon's token (the Windows pipe, decision 0032)."""

    code = "access_denied"


class AlreadyRunning(RagdError):
    code = "already_running"


class Interrupted(RagdError):
    """Work stopped because the daemon is stopping, paused, or has something more urgent."""

    code = "interrupted"


class TooManyFiles(RagdError):
    """A folder holds more entries than a collection may (a walk of `/` or `~` by mistake)."""

    code = "too_many_files"

    @classmethod
    def at(cls, root: str, limit: int) -> TooManyFiles:
        return cls(
            f"{root} holds more than {limit:,} files and folders, the limit for one collection",
            "index a smaller folder, or raise index.max_files in config.toml "
            "(RAGD_INDEX_MAX_FILES); at a terminal, `ragd index --collection NAME PATH "
            "--allow-large` lifts it for that collection")


class RootRefused(RagdError):
    """A collection's folder now resolves to a place the folder policy refuses (a link swapped
    in): its indexing is stopped, and what was indexed is kept (decision 0024)."""

    code = "root_refused"


class ConverterBusy(RagdError):
    """Too many documents are waiting for the converter a client's requests use."""

    code = "converter_busy"


class WriterBusy(RagdError):
    """Too many requests already wait for the one writer (the indexer): this one was not
    started, so nothing was changed, and it may be sent again after ``retry_after_s``
    (decision 0043)."""

    code = "busy"

    def __init__(self, message: str, hint: str = "", retry_after_s: float = 5.0) -> None:
        super().__init__(message, hint)
        self.retry_after_s = retry_after_s

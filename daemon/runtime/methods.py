"""Every IPC method's handler, by name: the core methods and the tools' (notes, code, concepts).

Assembled here, so that no handler module imports another's table: the daemon and the window
look a method up in ``HANDLERS``.
"""

from __future__ import annotations

from ragd.daemon.runtime.code_handlers import CODE_HANDLERS  # decision 0030
from ragd.daemon.runtime.concept_handlers import CONCEPT_HANDLERS  # decision 0033
from ragd.daemon.runtime.handlers import CORE_HANDLERS
from ragd.daemon.runtime.notes_handlers import NOTE_HANDLERS  # decision 0028
from ragd.daemon.runtime.surface import Handler

HANDLERS: dict[str, Handler] = {**CORE_HANDLERS, **NOTE_HANDLERS, **CODE_HANDLERS,
                                **CONCEPT_HANDLERS}

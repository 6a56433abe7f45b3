"""Sources: list the files of a collection and read each one into a ``Document`` or a ``Skip``."""

"""The `ragd` command line: the local commands, the remote (daemon) client, progress output, docs generation and `ragd doctor`."""

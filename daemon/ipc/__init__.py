"""The daemon's local IPC: the protocol, the asyncio server, the clients and discovery.

Deliberately empty: thin clients import ``ragd.daemon.ipc.client`` and must not pay for the server.
"""

"""ragd's own window: a local web page the daemon serves on loopback (issue 38, decision 0053)."""

"""The running daemon process: the app that indexes and searches, the service loop, request handlers, the job scheduler, the file watcher and launching."""

"""Operating splitstate: the ``splitstate`` CLI, status, progress, the local supervisor
that runs every processor on one machine, and a local Kafka broker for development."""

"""Development: ``python -m app dev``, its process supervisor and the local mailbox."""

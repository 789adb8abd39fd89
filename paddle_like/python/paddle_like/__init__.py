"""paddle_like: a collective-communication runtime (Python package)."""

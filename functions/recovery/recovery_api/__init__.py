"""recovery function: turns recovery requests into recovery mail (outbox table stream)."""

"""sessions endpoint group."""

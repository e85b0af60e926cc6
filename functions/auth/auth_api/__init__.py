"""auth endpoint group."""

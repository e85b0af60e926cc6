"""admin endpoint group."""

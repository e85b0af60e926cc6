"""accounts endpoint group."""

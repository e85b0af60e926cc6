"""second-factor endpoint group."""

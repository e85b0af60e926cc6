"""staff endpoint group: staff operations on accounts."""

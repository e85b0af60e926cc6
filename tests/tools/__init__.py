"""Tests of the tooling (local API emulator, operator tool), kept apart from the product's tests."""

"""Tooling unit tests run like the product's: network disabled, settings as the template sets them."""

from tests.unit.conftest import _no_network, _settings

__all__ = ["_no_network", "_settings"]

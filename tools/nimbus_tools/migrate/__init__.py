"""Moving from an upstream Cumulonimbus deployment: `nimbus import` (CONTRACT section 15)."""

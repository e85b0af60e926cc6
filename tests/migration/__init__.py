"""Tests of moving an upstream Cumulonimbus deployment's PostgreSQL data into Nimbus."""

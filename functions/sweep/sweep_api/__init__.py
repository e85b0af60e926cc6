"""sweep function: deletes stored sessions that can no longer authenticate (users table stream)."""

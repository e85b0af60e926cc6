"""Accounts and mail: changes to one account whoever makes them (``account_changes``), email
verification, the security notices, the system emails' text, and the staff audit trail.

May import: platform, domain, sessions.
"""

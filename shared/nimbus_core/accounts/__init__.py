"""Accounts and mail: changes to one account whoever makes them (``account_changes``), email
verification, the security notices, the system emails' text, the staff audit trail, the activity
as changes see it, and the policy on compromised passwords.

May import: platform, domain, sessions, compromised.
"""

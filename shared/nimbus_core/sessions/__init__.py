"""Identity and sessions: bearer tokens and their hashes, upstream's tokens, passwords and the
limits on wrong ones, authentication (header to caller in one read), issuing and revoking sessions.

May import: platform, domain.
"""

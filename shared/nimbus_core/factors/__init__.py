"""Second factors: TOTP and backup codes (``otp``), security keys and passkeys (``passkeys``), the
challenge shared by login and reverification (``challenges``), and reverification itself.

May import: platform, domain, sessions.
"""

"""Second factors. The challenge shared by login, reverification, the password reset and a
passkey's sign-in (``challenges``) and the shape of an answer (``answers``); one strategy per kind
of factor behind one interface (``kinds``: ``totp``, ``security_keys``, ``backup_codes``), with
their arithmetic and ceremonies (``otp``, ``seeds``; WebAuthn's ``webauthn_registration``,
``webauthn_assertion``, ``webauthn_encoding``); and reverification itself (``reverify``).

May import: platform, domain, sessions.
"""

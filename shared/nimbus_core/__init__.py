"""Nimbus core: the code every function shares (the SharedLayer), in packages by concern.

- ``platform``: time, ids, deployment settings, metrics, the stream batch wiring.
- ``domain``: the records, errors and ports, and the seed's controls (scopes, kill switches,
  rate limits, log levels).
- ``sessions``: tokens, passwords, authentication and the issuing and revoking of sessions.
- ``factors``: second factors (TOTP, backup codes, security keys) and their challenges.
- ``compromised``: the shipped compromised-password list and the Have I Been Pwned range client.
- ``accounts``: changes to an account, email verification, security notices, the system emails.
- ``http``: the edge: app, routing, the endpoint guard, request validation, responses.
- ``adapters``: boto3, implementing the ports.

Each package's docstring ends with the packages it may import; ``tests/unit/test_package_imports.py``
holds every module to it.
"""

__version__ = "0.1.0"

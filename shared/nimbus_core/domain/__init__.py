"""Domain: what every rule shares: the records and their public JSON (``models``, typed by the
views of ``views``), the errors (``errors``), the ports to the outside world (``ports``: the ops
and values they exchange, the transactor and the clock; the stores by concern in ``user_ports``,
``token_ports`` (the kinds of single-use secret it keeps in ``secret_kinds``) and
``deployment_ports``; all bundled in ``deps``), the uniqueness keys (``identity``), and the seed's
controls: scopes, kill switches, rate limits and their limiter, log levels; plus readable device
names (``useragent``).

May import: platform.
"""

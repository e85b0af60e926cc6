"""The guard's steps (CONTRACT section 4), one module each: every step says when it applies to an
endpoint (read from its :class:`~nimbus_core.http.policy.Endpoint` and policy), which errors it can
answer there, and runs its check. :mod:`nimbus_core.http.guard` composes them in the contract's
order, and the OpenAPI document lists what an endpoint can answer from the same objects.

A step module imports the http modules it needs and at most a few outside http (its own check's),
so what the guard depends on is read step by step.

May import: platform, domain, sessions, factors, accounts.
"""

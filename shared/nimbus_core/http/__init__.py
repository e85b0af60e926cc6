"""The HTTP edge shared by every function: the app and its Lambda handler, endpoint declarations
(policy, registry), route matching, event accessors, the endpoint guard (its steps, one module
each, in ``steps``) and the request it hands a route, request input and validation, the response
shapes, and the one place errors become responses.

May import: platform, domain, sessions, factors, accounts.
"""

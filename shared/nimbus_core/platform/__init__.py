"""Platform: what any code needs whatever it does: the clock, identifiers and secrets, the
deployment's settings (read once per container), business metrics, the stream-fed functions'
batch wiring.

May import: nothing else of nimbus_core.
"""

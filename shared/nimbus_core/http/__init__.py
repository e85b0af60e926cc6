"""The HTTP edge shared by every function: app and handler, route table, event accessors, the
endpoint guard, responses."""

"""The HTTP edge shared by every function: app factory, responses, the endpoint guard."""

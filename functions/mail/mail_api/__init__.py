"""mail function: sends outbox messages through SES."""

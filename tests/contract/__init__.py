"""One suite, two implementations: the in-memory fakes and the DynamoDB adapters on moto."""

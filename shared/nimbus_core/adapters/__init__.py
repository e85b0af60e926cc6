"""Adapters: the only code that talks to AWS (boto3). Services use them through small functions."""

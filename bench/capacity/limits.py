"""The limits AWS sets and the list prices the capacity model holds every mix against (docs/scale.md
names each source), and the model's own assumptions."""

from __future__ import annotations

import inspect
import math
from pathlib import Path

from nimbus_core.domain.limiter import RefusalMemo

MIXES_PATH = Path(__file__).parents[1] / "capacity.toml"
RTT_MS = 4.0  # an assumed in-region round trip to DynamoDB, SSM or SES from Lambda
# Limits, as AWS documents them for us-east-1 (docs/scale.md names each source).
KEY_WCU, KEY_RCU = 1_000, 3_000  # one partition key value (base table or index), per second
# Transactions writing one item at once cancel each other (TransactionConflict). AWS gives no rate;
# ours is an assumption: a transaction holds its items for milliseconds, so past about a hundred a
# second on one item most would meet another.
KEY_TRANSACTIONS = 100
TABLE_UNITS = 40_000  # an on-demand table's (and each index's) default read and write quota
# GetParameters: standard throughput is fixed at 40 TPS; higher throughput is a setting of the
# account (`nimbus ssm-throughput enable`), with its own quota (3,000 TPS by default).
SSM_TPS, SSM_HIGH_TPS = 40, 3_000
# SES out of the sandbox: the quotas AWS grants "vary with the use case"; 14 messages/s and 50,000
# a day are what new production accounts have been given. The sandbox: 1/s and 200 a day.
SES_RATE, SES_DAILY, SES_SANDBOX_DAILY = 14, 50_000, 200
LAMBDA_CONCURRENCY = 1_000  # the account's default concurrent executions in a region
LAMBDA_UNRESERVED_MIN = 100  # what Lambda keeps unreserved in every account
API_RPS = 10_000  # API Gateway's default account throttle per region (all APIs)
# A warm instance serves requests one at a time, and Lambda keeps the instances a busy moment
# needed for minutes: under Poisson arrivals the busy ones reach mean + 3 standard deviations.
WARM_SPREAD = 3.0
# What a request costs CloudWatch Logs beside the function's own lines: Lambda's platform records
# (start and report, JSON) per invocation, and the API's access-log line per request (its Format).
PLATFORM_LOG_BYTES, ACCESS_LOG_BYTES = 600, 300
RESPONSE_HEADER_BYTES = 400  # status line and headers of an answer, beside its body
# X-Ray's default sampling rule: the first request each second, then 5 % (per function).
XRAY_RESERVOIR, XRAY_RATE = 1.0, 0.05
# List prices, us-east-1, per unit (Lambda arm64; HTTP API over 300M requests a month; DynamoDB
# on-demand; SES outbound mail; SSM higher throughput per API call; X-Ray traces recorded;
# CloudWatch Logs ingestion per byte; data transfer out to the internet per byte, first 10 TB).
PRICE = {
    "lambda_gb_s": 0.0000133334,
    "lambda_request": 0.20e-6,
    "api_request": 0.90e-6,
    "api_request_first_300m": 1.00e-6,
    "wru": 0.625e-6,
    "rru": 0.125e-6,
    "storage_gb_month": 0.25,
    "pitr_gb_month": 0.20,
    "ses_message": 0.10e-3,
    "ssm_high_call": 0.05e-4,
    "xray_trace": 5.0e-6,
    "logs_byte": 0.50 / 1024**3,
    "transfer_byte": 0.09 / 1024**3,
    "alarm_month": 0.10,
    "dashboard_month": 3.0,
}
MONTH_S = 30 * 86_400
FAR = 1_000  # ceilings more than this many times the goal are not listed
HEADROOM = 2.0  # what the operator's quota requests aim for
# Amazon Cognito user pools, per monthly active user (aws.amazon.com/cognito/pricing; docs/scale.md
# says where each figure was read): (MAUs up to, price each) bands after the free ones.
COGNITO = {
    "Lite": (
        (10_000, 0.0),
        (100_000, 0.0055),
        (1_000_000, 0.0046),
        (10_000_000, 0.00325),
        (math.inf, 0.0025),
    ),
    "Essentials": ((10_000, 0.0), (math.inf, 0.015)),
}
MEMO_SIZE = int(inspect.signature(RefusalMemo).parameters["size"].default)

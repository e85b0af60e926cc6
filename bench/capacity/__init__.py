"""``make capacity``: the stack as deployed, held to the traffic mixes of ``bench/capacity.toml``:
where each AWS resource and each limit the template sets meets its first ceiling, what a month
costs, and what it costs per monthly active user beside Amazon Cognito (docs/scale.md).

Each scenario a mix names is run once on moto through the calls part of ``make bench``, and so are
the stream functions' own invocations (a mail sent, a user item swept, a recovery request). Every
DynamoDB call is turned into the items it reads and writes, with their sizes (the items are looked
up in moto before and after the call; a Query is counted by the items it reads, not the ones its
filter returns), so read and write units come out per key class and per index, as DynamoDB bills
and throttles them. The template gives what caps traffic as deployed (``deploy``): route
throttles, memory (so CPU share), reserved concurrency, warm throughput. The mixes then scale
every figure linearly, and each limit gives the traffic at which it is reached.

The parts, in the order a run uses them: ``limits`` (AWS's limits and prices), ``costs`` (what one
request costs, by key class), ``recorder`` (turns DynamoDB calls into those costs), ``measure``
(runs the scenarios), ``deploy`` (the template's limits), ``model`` and ``ceilings`` (a mix at its
goal), ``prices`` (a month, per active users), ``report`` (the tables), ``mixes`` (the whole run),
``__main__`` (docs/scale.md and its chart).
"""

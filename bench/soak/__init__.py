"""``python -m bench.soak`` (``make soak``): minutes of mixed traffic against the local API, judged.

Simulated users (``--clients`` threads, one life after another) and one staff member drive the local
API it starts (or a running ``make serve``, with ``--state``) through tests/api_client.py, the client
the end-to-end tests use; docs/performance.md ("Soak") says what they do and what fails the run.

* ``__main__``: the command line; the local API started or attached to; the threads; the verdict;
* ``client``: ``Soak``, the shared client with every request paused, timed and recorded, per-user
  source addresses and the outbox as a user's mailbox; ``Person``, what every actor does alike;
* ``traffic``: a user's life, its hostile input, the staff member's victims;
* ``memory``: the sampler (RSS, items, mail, invariants) and the memory figures and allowance;
* ``report``: what is printed, and why the soak fails.
"""

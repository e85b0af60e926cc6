"""``python -m bench.soak`` (``make soak``): minutes of mixed traffic against the local API, judged.

It starts its own local API (``start_local_api``, as tests/e2e/conftest.py does: free ports, a
temporary state directory) or, with ``--state .local/serve.json``, attaches to a running ``make
serve``. Then ``--clients`` threads (default 8) each play simulated users one after another, and one
more thread plays a staff member, for ``--minutes`` (default 2):

* a user registers, reads ``/users/me`` and the domains, logs in (sometimes first with a wrong
  password or an unknown name), lists, reads, renames and revokes its sessions, creates a scoped
  session and uses it (and what its scopes forbid), changes its username, email (and verifies it with
  the mailed token), domain and password, enrols TOTP and logs in through the challenge (answered
  with TOTP or backup codes, sometimes wrongly first), asks for a recovery email and resets its
  password with the mailed token, and finally deletes its account; each step but the first and last
  with some probability, so the mix differs between users;
* on the way it sends hostile input: bodies that are not JSON, not UTF-8, not objects, nested 5,000
  deep, over 64 KiB; fields of the wrong type; tampered tokens, dead users' tokens, other users'
  session and user ids; unknown routes. Each must be refused with a 4xx (a 2xx is a failure, as a
  5xx is);
* the staff member (promoted with ``nimbus staff promote`` after enrolling TOTP, as staff must have a
  second factor) registers victims and reads, renames, bans, unbans and deletes them, reverifying
  with backup codes or TOTP and regenerating the codes when they run low.

Every user has its own loopback source address (127.64.0.1 onwards, randomly offset per run; the
local API takes the client IP from the socket, never from a header), and the per-IP and per-user
rate limits of CONTRACT section 10 are respected per user, so the soak is not a 429 test; a recovery
and a challenged login come from a second address, as from another device. Users pause before each
request (``--think-ms``, 200 ms on average): without pauses eight users saturate the emulator on a
two-core machine, the stream-fed mail and sweep functions fall behind, and every figure then
describes the backlog rather than the service.

Verdict (the exit status is 1 if any fails): no 5xx and no transport error, no hostile request
accepted, the invariants of tests/invariants.py (``stack_violations``: users, sessions, tokens,
outbox) hold, checked every ``--invariant-seconds`` while the traffic runs (a finding counts if an
immediate second check repeats it: the Scans are no snapshot) and once more after it has stopped,
and the memory does not grow.

Memory is sampled and judged as memory.py describes: only the growth of the second half counts,
within an allowance for the data the run still adds.

The package, in the order a run goes through it:

* ``__main__``: the command line; starts the local API (or attaches to one), stops it, PASS or FAIL;
* ``run``: the actors' threads and the sampler's, the settling after the traffic, the verdict;
* ``client``: ``Soak``, the API under soak: requests from per-user source addresses, recorded
  (``recorder``), and the emulator's DynamoDB and SES;
* ``accounts``, ``actor``, ``users``, ``hostile``, ``staff``: what the simulated users and the staff
  member know and do;
* ``sampler``, ``memory``, ``checks``: RSS, items and mail read every few seconds, the memory figures
  and their allowance, the invariant checks;
* ``report``, ``verdict``: what is printed, and why the soak fails.

Printed: requests, throughput, per kind of request the statuses and p50/p95/p99 latency, the
failures (request and response), RSS at the start (after the warm-up, the first ``--warm-up``
fraction of the run), peak and end, the slope and growth over the second half, items and emails,
and the invariant checks run with their violations.
"""

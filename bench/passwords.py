"""The compromised-password check (``nimbus_core.compromised``): what importing it adds to the
handler that registers and logs in (AuthFunction's), what its first use costs (reading the shipped
list), and the CPU of one lookup, listed and not; and the Have I Been Pwned client's parsing of a
padded range answer. Each sample is a fresh interpreter (``bench.runs``), timing CPU
(``time.process_time``) around each step.
"""

from __future__ import annotations

import json
import statistics

from bench.runs import Report, child_env, result_line, round_robin, run_child
from bench.table import render
from nimbus_tools.template import Template, function_specs

HANDLER = "auth_api.handler"
LOOKUPS = 20_000
CHILD = """
import importlib, json, random, string, sys, time
importlib.import_module(sys.argv[1])
clock = time.process_time
start = clock()
from nimbus_core.compromised import is_listed, shipped
from nimbus_core.compromised import pwned_range
imported = clock() - start
start = clock()
is_listed("first use")
loaded = clock() - start
rng = random.Random(7)
listed = ["123456", "password", "qwerty", "letmein", "070162"] * (int(sys.argv[2]) // 5)
alphabet = string.ascii_letters + string.digits + string.punctuation
unlisted = ["".join(rng.choices(alphabet, k=12)) for _ in range(int(sys.argv[2]))]
def per_lookup(passwords):
    start = clock()
    for password in passwords:
        is_listed(password)
    return (clock() - start) / len(passwords)
hit, miss = per_lookup(listed), per_lookup(unlisted)
assert all(map(is_listed, listed)) and not any(map(is_listed, unlisted))
prefix, suffix = pwned_range.split_sha1("Summer2019!Bristol")
body = "\\r\\n".join(f"{rng.getrandbits(140):035X}:{rng.randint(0, 9000)}" for _ in range(900)).encode()
start = clock()
for _ in range(200):
    pwned_range.times_seen(body, suffix)
parse = (clock() - start) / 200
size = shipped.fingerprints().buffer_info()[1] * shipped.fingerprints().itemsize
print("RESULT", json.dumps([imported, loaded, hit, miss, parse, size, len(shipped.fingerprints())]))
"""


def run(template: Template, runs: int) -> Report:
    """``runs`` fresh interpreters (after a warm-up), each importing AuthFunction's handler, then
    the check, then timing its first use and ``LOOKUPS`` lookups of each kind."""
    [auth] = [spec for spec in function_specs(template) if spec.handler_module == HANDLER]
    env = child_env(auth.environment)

    def sample(_: str) -> list[float]:
        result = run_child(["-c", CHILD, HANDLER, str(LOOKUPS)], env, timeout=120)
        return [float(x) for x in json.loads(result_line(result.stdout, "RESULT "))]

    samples = round_robin(["check"], runs, sample)["check"]
    median = [statistics.median(column) for column in zip(*samples, strict=True)]
    imported, loaded, hit, miss, parse, size, entries = median
    rows = [
        ["import of nimbus_core.compromised, added to AuthFunction's handler", f"{imported * 1e3:.2f} ms"],
        [f"first use: reading the shipped list ({entries:,.0f} entries)", f"{loaded * 1e3:.2f} ms"],
        ["memory held by the list (one array of 64-bit fingerprints)", f"{size / 1e3:,.0f} kB"],
        ["one lookup, a listed password", f"{hit * 1e6:.2f} us"],
        ["one lookup, a password not listed", f"{miss * 1e6:.2f} us"],
        ["Have I Been Pwned: parsing a padded answer (900 lines)", f"{parse * 1e6:.0f} us"],
    ]
    table = render(["CPU (median of runs)", "figure"], rows, right=frozenset({1}))
    note = f"\n{runs} fresh interpreters after a warm-up; lookups: {LOOKUPS:,} of each kind per run."
    names = ["import_s", "load_s", "hit_s", "miss_s", "parse_s", "bytes", "entries"]
    data = dict(zip(names, median, strict=True))
    return Report(table + note, data, [])

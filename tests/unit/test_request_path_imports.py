"""What a sign-in does not load on its request path: the User-Agent parser (and its YAML rules) is
for showing a session's or an event's device, which a listing or the activity function does later.
Loading it in a login cost the cold-start budget a third of its margin once (docs/performance.md)."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_a_register_and_logins_with_a_browsers_user_agent_never_load_the_user_agent_parser() -> None:
    script = textwrap.dedent(
        """
        import sys
        from auth_api.routes import routes
        from tests.fakes import fake_world
        from tests.unit.test_activity_rules import _register, _request

        world = fake_world()
        _register(world)
        for password in ("correct horse", "a wrong one"):
            _request(world, routes, "POST", "/login", {"username": "alice", "password": password})
        print(sorted(m for m in sys.modules if m.split(".")[0] in ("ua_parser", "yaml")))
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script], cwd=REPO, capture_output=True, text=True, timeout=120, check=True
    )
    assert done.stdout.strip().splitlines()[-1] == "[]", done.stderr[-2000:]

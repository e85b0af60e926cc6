"""The page behind the verification link when it points at the local API (``make serve``).

Deployed, the link opens the file host's own front end. Locally there is none, so the local API
answers ``GET /verify?token=...`` with this small page: it sends the token to ``PUT /users/verify``
(the real endpoint, through the same gateway and function) and shows the outcome. The token never
leaves the browser except in that request; the page itself is static and embeds nothing from the URL.
"""

from __future__ import annotations

from nimbus_tools.local.events import HttpRequest, HttpResponse

PATH = "/verify"

_PAGE = """<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Verify your email - Nimbus (local)</title>
<style>
body { font-family: system-ui, sans-serif; max-width: 32rem; margin: 4rem auto; padding: 0 1rem; }
#outcome { padding: 1rem; border-radius: .5rem; background: #eef; }
#outcome.ok { background: #e6f6e6; } #outcome.error { background: #fbe9e9; }
</style>
</head>
<body>
<h1>Email verification</h1>
<p id="outcome" role="status">Verifying...</p>
<script>
(async () => {
  const outcome = document.getElementById("outcome");
  const token = new URLSearchParams(window.location.search).get("token");
  const show = (text, kind) => { outcome.textContent = text; outcome.className = kind; };
  if (!token) { show("This link has no token.", "error"); return; }
  try {
    const reply = await fetch("/users/verify", {
      method: "PUT",
      headers: {"Content-Type": "application/json"},
      body: JSON.stringify({token}),
    });
    const body = await reply.json();
    if (reply.ok) { show("Your email address is verified. You can close this page.", "ok"); }
    else { show(`Verification failed: ${body.message} (${body.code})`, "error"); }
  } catch (error) {
    show(`Verification failed: ${error}`, "error");
  }
})();
</script>
</body>
</html>
"""


def is_verify_page(request: HttpRequest) -> bool:
    """Whether ``request`` opens the verification link."""
    return request.method in ("GET", "HEAD") and request.raw_path.rstrip("/") == PATH


def verify_page() -> HttpResponse:
    """The static page; its script calls ``PUT /users/verify`` with the link's token."""
    headers = [
        ("content-type", "text/html; charset=utf-8"),
        ("cache-control", "no-store"),
        ("referrer-policy", "no-referrer"),  # the token is in the URL: never pass it on
        (
            "content-security-policy",
            "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; connect-src 'self'",
        ),
    ]
    return HttpResponse(200, headers, _PAGE.encode())

"""Settings every test process shares, applied before any service module is imported."""

from __future__ import annotations

import os

# Powertools names child loggers after the service when their module is imported; the functions get
# the name from the template (POWERTOOLS_SERVICE_NAME), so a test process importing a module before
# any handler would otherwise log through "service_undefined" and not the functions' logger.
os.environ.setdefault("POWERTOOLS_SERVICE_NAME", "nimbus")

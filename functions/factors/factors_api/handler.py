"""Lambda entry point of the second-factor group (/users/me/2fa...): wiring only."""

from factors_api.routes import routes
from nimbus_core.adapters import snapstart
from nimbus_core.adapters.container import production_deps
from nimbus_core.http.app import create_app, create_handler

snapstart.register_hooks()
app = create_app(routes, deps=production_deps)
lambda_handler = create_handler(app)

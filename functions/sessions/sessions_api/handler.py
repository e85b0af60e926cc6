"""Lambda entry point of the sessions group (/users/me/sessions..., /users/:uid/sessions...): wiring only."""

from nimbus_core.adapters import snapstart
from nimbus_core.adapters.container import production_deps
from nimbus_core.http.app import create_app, create_handler
from sessions_api.routes import routes

snapstart.register_hooks()
app = create_app(routes, deps=production_deps)
lambda_handler = create_handler(app)

"""Lambda entry point of the staff group (/users and /users/{id}...): wiring only."""

from nimbus_core.adapters import snapstart
from nimbus_core.adapters.container import production_deps
from nimbus_core.http.app import create_app, create_handler
from staff_api.routes import routes

snapstart.register_hooks()
app = create_app(routes, deps=production_deps)
lambda_handler = create_handler(app)

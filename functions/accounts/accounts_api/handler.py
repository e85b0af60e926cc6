"""Lambda entry point of the accounts group (/users...): wiring only."""

from accounts_api.routes import router
from nimbus_core.http.app import create_app, create_handler

app = create_app()
app.include_router(router)
lambda_handler = create_handler(app)

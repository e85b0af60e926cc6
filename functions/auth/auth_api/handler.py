"""Lambda entry point of the auth group (POST /register, POST /login): wiring only."""

from auth_api.routes import router
from nimbus_core.http.app import create_app, create_handler

app = create_app()
app.include_router(router)
lambda_handler = create_handler(app)

"""Lambda entry point of the admin group: GET / and the $default route (JSON 404 for anything unknown)."""

from admin_api.routes import router
from nimbus_core.http.app import create_app, create_handler

app = create_app()
app.include_router(router)
lambda_handler = create_handler(app)

"""The REST API: Litestar app, controllers, wire schemas, problem+json errors."""

"""A drop-in for mem0's Platform API (docs/mem0.md): the routes mem0's official client calls,
translated to this service's own services."""

from app.api.mem0.routes import Mem0Controller

__all__ = ["Mem0Controller"]

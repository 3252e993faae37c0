"""What every console page answers with: its templates, the session cookie, and the
Form body of a posted form."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

from jinja2 import Environment, FileSystemLoader, select_autoescape
from litestar import MediaType, Request, Response
from litestar.datastructures import Cookie
from litestar.enums import RequestEncodingType
from litestar.params import Body

from app.console import csrf
from app.retrieval.pipeline import STAGES
from app.vocabulary import SEED_CATEGORIES

COOKIE = "cognis_console_session"
TEMPLATES = Environment(
    loader=FileSystemLoader(Path(__file__).parent / "templates"),
    autoescape=select_autoescape(),
)
TEMPLATES.globals["categories"] = SEED_CATEGORIES
Form = Annotated[dict[str, str], Body(media_type=RequestEncodingType.URL_ENCODED)]


def render(template: str, status_code: int = 200, **context: Any) -> Response[str]:
    """A page; with `csrf` (the session's token) it is a logged-in page: navigation, forms."""
    html = TEMPLATES.get_template(template).render(stages=STAGES, **context)
    return Response(html, media_type=MediaType.HTML, status_code=status_code)


def page(request: Request, template: str, status_code: int = 200, **context: Any) -> Response[str]:
    """A logged-in page: its forms carry the session's CSRF token."""
    token = csrf.session_token(request.cookies.get(COOKIE, ""))
    return render(template, status_code, csrf=token, **context)


def console_cookie(request: Request, name: str, value: str, max_age: int | None = None) -> Cookie:
    """A cookie for the console's pages only, out of reach of scripts and other sites."""
    return Cookie(
        key=name,
        value=value,
        path="/console",
        max_age=max_age,
        httponly=True,
        samesite="strict",
        secure=request.url.scheme == "https",
    )


def session_cookie(request: Request, secret: str, max_age: int | None = None) -> Cookie:
    return console_cookie(request, COOKIE, secret, max_age)

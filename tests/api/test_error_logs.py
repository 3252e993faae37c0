"""A server error is logged without the user's content: SQL parameters stay out of logs."""

from __future__ import annotations

import json
import uuid

from sqlalchemy import text


def _json(line: str) -> dict | None:
    """A JSON log line; None for anything else. The API subprocess's log also holds other
    writers' output (its session's other requests, run by other tests, in other threads), and
    one run saw two of their lines run together: such a line is not this test's."""
    try:
        parsed = json.loads(line) if line.startswith("{") else None
    except ValueError:
        return None
    return parsed if isinstance(parsed, dict) else None


async def test_unhandled_error_log_line_carries_no_user_content(api, db, user_id) -> None:
    """A trigger that fails this one user's inserts forces a real 500 from inside the INSERT,
    whose parameters are the memory's content, metadata and embeddings."""
    marker = f"secret-{uuid.uuid4().hex}"
    function = f"fail_{user_id.replace('-', '_')}"
    async with db.begin() as connection:
        await connection.execute(
            text(
                f"CREATE FUNCTION {function}() RETURNS trigger LANGUAGE plpgsql AS $$ "
                f"BEGIN IF NEW.user_id = '{user_id}' THEN "
                "RAISE EXCEPTION 'forced failure for the log test'; END IF; RETURN NEW; END $$"
            )
        )
        await connection.execute(
            text(
                f"CREATE TRIGGER {function} BEFORE INSERT ON memories "
                f"FOR EACH ROW EXECUTE FUNCTION {function}()"
            )
        )
    try:
        # The API process's own log: the subprocess API answers this request.
        async with api.client() as http:
            response = await http.post(
                f"/v1/users/{user_id}/memories",
                json={"content": f"my salary is {marker}", "metadata": {"note": marker}},
            )
    finally:
        async with db.begin() as connection:
            await connection.execute(text(f"DROP TRIGGER {function} ON memories"))
            await connection.execute(text(f"DROP FUNCTION {function}()"))
    assert response.status_code == 500, response.text
    assert marker not in response.text

    lines = [parsed for line in api.log_text().splitlines() if (parsed := _json(line))]
    errors = [line for line in lines if line.get("event") == "api.unhandled_error"]
    mine = [line for line in errors if user_id in line.get("path", "")]
    assert mine, "the 500 was not logged"
    logged = json.dumps(mine)
    assert "forced failure for the log test" in logged  # the error itself is there
    assert marker not in logged
    assert marker not in api.log_text()

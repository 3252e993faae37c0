// Writes openapi.json: the service's OpenAPI document, as the API serves it at
// /schema/openapi.json, built from the app's route handlers by the repository's Python
// (no server, no database: the app object is made, never started). Then `npm run generate`.
import { execFileSync } from "node:child_process";
import { existsSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const here = dirname(fileURLToPath(import.meta.url));
const root = join(here, "..", "..", "..");
const venvPython = join(root, ".venv", "bin", "python");
const python = process.env.COGNIS_PYTHON ?? (existsSync(venvPython) ? venvPython : "python3");
const program = `
import json, sys
from app.asgi import create_app
from app.config import Settings
document = create_app(Settings()).openapi_schema.to_schema()
sys.stdout.write(json.dumps(document, indent=2, sort_keys=True) + "\\n")
`;
const output = execFileSync(python, ["-c", program], {
  cwd: root,
  // Settings require a database URL; nothing connects to it.
  env: {
    ...process.env,
    COGNIS_DATABASE_URL: process.env.COGNIS_DATABASE_URL ?? "postgresql+asyncpg://unused@127.0.0.1:1/unused",
    PYTHONPATH: root,
  },
  maxBuffer: 64 * 1024 * 1024,
});
writeFileSync(join(here, "..", "openapi.json"), output);
console.log(`openapi.json: ${output.length} bytes`);

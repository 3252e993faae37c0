// cognis-memory-client: the Cognis Memory REST API for TypeScript and JavaScript (Node 20+).
export * from "./client.js";
export * from "./errors.js";
export type { components, operations, paths } from "./schema.js";

import { defineConfig } from "vitest/config";

export default defineConfig({
  test: {
    include: ["test/**/*.test.ts"],
    // Every call goes to the real API (embedding, both stores): seconds, not milliseconds.
    testTimeout: 60_000,
    hookTimeout: 60_000,
  },
});

// The TypeScript client against the real running API (COGNIS_URL, COGNIS_API_KEY): no mocks
// of the service. tests/clients/test_typescript_client.py starts the API and runs this suite.
import { randomUUID } from "node:crypto";
import { createServer } from "node:net";

import { afterAll, beforeAll, describe, expect, it } from "vitest";

import {
  AuthenticationError,
  CognisClient,
  CognisError,
  InvalidRequestError,
  NoAnswerError,
  NotFoundError,
  PreconditionFailedError,
  RateLimitedError,
  ServiceUnavailableError,
  TooMuchWorkError,
  type ExportLine,
  type Memory,
} from "../src/index.js";
import { startProxy, type Proxy } from "./proxy.js";

const baseUrl = process.env.COGNIS_URL;
const apiKey = process.env.COGNIS_API_KEY;
if (!baseUrl || !apiKey) {
  throw new Error("set COGNIS_URL and COGNIS_API_KEY to a running API (tests/clients/test_typescript_client.py does)");
}
const cognis = new CognisClient({ baseUrl, apiKey });

function newUser(): string {
  return `ts-${randomUUID().slice(0, 12)}`;
}

async function collect<T>(items: AsyncIterable<T>): Promise<T[]> {
  const out: T[] = [];
  for await (const item of items) out.push(item);
  return out;
}

describe("CognisClient against the API", () => {
  it("round-trips a memory: create, get, search, update, history, delete", async () => {
    const userId = newUser();
    const first = await cognis.addMemory(userId, { content: "Ines lives in Tokyo.", category: "personal_details" });
    expect([first.user_id, first.version, first.is_current]).toEqual([userId, 1, true]);
    expect(await cognis.getMemory(userId, first.id)).toEqual(first);

    const found = await cognis.search(userId, "where does Ines live", { consistency: "indexed" });
    expect(found.results[0]?.memory.id).toBe(first.id);
    expect(found.index_lag.stale).toBe(false);

    const moved = await cognis.updateMemory(userId, first.id, { content: "Ines lives in Osaka." });
    expect([moved.id, moved.replaces_id, moved.chain_id, moved.category]).toEqual([
      first.id,
      first.version_id,
      first.id,
      "personal_details",
    ]);
    expect(moved.version_id).not.toBe(first.version_id);
    const after = await cognis.search(userId, "where does Ines live", { consistency: "indexed" });
    expect(after.results[0]?.memory.content).toBe("Ines lives in Osaka.");

    const ended = await cognis.deleteMemory(userId, moved.id);
    expect(ended.is_current).toBe(false);
    expect(ended.superseded_at).not.toBeNull();
    const chain = await cognis.history(userId, first.id);
    expect(chain.versions.map((v) => v.content)).toEqual(["Ines lives in Tokyo.", "Ines lives in Osaka."]);
    expect(chain.versions.every((v) => !v.is_current)).toBe(true);
    const gone = await cognis.search(userId, "where does Ines live", { consistency: "indexed" });
    expect(gone.results.filter((hit) => !hit.superseded)).toEqual([]);
  });

  it("keeps a memory's id across updates; ifMatch refuses a stale version (412)", async () => {
    const userId = newUser();
    const first = await cognis.addMemory(userId, { content: "Ines has one cat." });
    const second = await cognis.updateMemory(userId, first.id, { content: "Ines has two cats." });
    // The id kept from the create, and the old version's id, both name the memory still.
    const third = await cognis.updateMemory(userId, first.version_id, { content: "Ines has three cats." });
    expect([second.id, third.id, third.version]).toEqual([first.id, first.id, 3]);
    expect((await cognis.getMemory(userId, first.id)).version_id).toBe(third.version_id);
    expect((await cognis.getMemory(userId, second.version_id)).content).toBe("Ines has two cats.");

    const stale = await cognis
      .updateMemory(userId, first.id, { content: "Ines has no cat." }, { ifMatch: second })
      .catch((error: unknown) => error);
    expect(stale).toBeInstanceOf(PreconditionFailedError);
    expect([(stale as PreconditionFailedError).status, (stale as PreconditionFailedError).currentVersionId]).toEqual([
      412,
      third.version_id,
    ]);
    const fourth = await cognis.updateMemory(userId, first.id, { content: "Ines has four cats." }, { ifMatch: third });
    expect([fourth.id, fourth.replaces_id]).toEqual([first.id, third.version_id]);
    await expect(cognis.deleteMemory(userId, first.id, { ifMatch: third.version_id })).rejects.toBeInstanceOf(
      PreconditionFailedError,
    );
    const ended = await cognis.deleteMemory(userId, first.id, { ifMatch: fourth });
    expect([ended.id, ended.version_id, ended.is_current]).toEqual([first.id, fourth.version_id, false]);
    const history = await cognis.history(userId, second.version_id);
    expect([history.id, history.versions.map((v) => v.version)]).toEqual([first.id, [1, 2, 3, 4]]);
  });

  it("deletes every memory a filter keeps, then all of them, keeping their history", async () => {
    const userId = newUser();
    const shared = await cognis.addMemory(userId, "Ines likes window seats.");
    const planner = await cognis.addMemory(userId, { content: "Ines booked the Lisbon hotel.", agent_id: "planner" });
    const unfiltered = await cognis.deleteMemories(userId, {}).catch((error: unknown) => error);
    expect(unfiltered).toBeInstanceOf(InvalidRequestError);
    expect((unfiltered as InvalidRequestError).problem["field"]).toBe("all");

    const ended = await cognis.deleteMemories(userId, { agent_id: "planner", waitFor: "indexed" });
    expect([ended.user_id, ended.deleted, ended.ids]).toEqual([userId, 1, [planner.id]]);
    expect((await cognis.listMemories(userId)).items.map((m) => m.id)).toEqual([shared.id]);
    const rest = await cognis.deleteMemories(userId, { filters: { field: "agent", op: "exists", value: false } });
    expect(rest.ids).toEqual([shared.id]);
    expect((await cognis.deleteMemories(userId, { all: true })).deleted).toBe(0);
    expect((await cognis.getMemory(userId, planner.id)).is_current).toBe(false);
    expect((await cognis.history(userId, shared.id)).versions.map((v) => v.content)).toEqual([shared.content]);
  });

  it("reads a context block and a profile after an update", async () => {
    const userId = newUser();
    const first = await cognis.addMemory(userId, { content: "Ines lives in Tokyo.", category: "personal_details" });
    const moved = await cognis.updateMemory(userId, first.id, { content: "Ines lives in Osaka." });
    const block = await cognis.context(userId, null, { max_tokens: 100, template: "markdown" });
    expect(block.cited.map((c) => [c.section, c.id, c.replaced_content])).toEqual([
      ["changes", moved.id, "Ines lives in Tokyo."],
    ]);
    expect(block.tokens).toBeLessThanOrEqual(100);
    expect(block.block).toContain("Ines lives in Osaka. (changed from: Ines lives in Tokyo.)");
    const profile = await cognis.profile(userId, { filters: { field: "category", op: "eq", value: "personal_details" } });
    expect(profile.total).toBe(1);
    expect(profile.categories[0]?.memories[0]?.replaced?.content).toBe("Ines lives in Tokyo.");
  });

  it("writes once when the same idempotency key is sent twice", async () => {
    const userId = newUser();
    const idempotencyKey = randomUUID();
    const first = await cognis.addMemory(userId, "Ines drinks oat milk.", { idempotencyKey });
    const again = await cognis.addMemory(userId, "Ines drinks oat milk.", { idempotencyKey });
    expect(again.id).toBe(first.id);
    const listed = await cognis.listMemories(userId);
    expect(listed.items.map((m) => m.id)).toEqual([first.id]);
    // A different key is a different write.
    const other = await cognis.addMemory(userId, "Ines drinks oat milk.");
    expect(other.id).not.toBe(first.id);
    expect((await cognis.listMemories(userId)).items).toHaveLength(2);
  });

  it("pages through the list with cursors, with its filters", async () => {
    const userId = newUser();
    const created = await cognis.addMemories(userId, [
      ...[0, 1, 2, 3].map((n) => ({ content: `Ines owns ${n} bicycles.`, category: "hobbies" })),
      { content: "Ines cycled to Porto.", category: "travel" },
    ]);
    expect(created).toHaveLength(5);
    const firstPage = await cognis.listMemories(userId, { limit: 2 });
    expect(firstPage.items).toHaveLength(2);
    expect(firstPage.next_cursor).not.toBeNull();
    const secondPage = await cognis.listMemories(userId, { limit: 2, cursor: firstPage.next_cursor });
    expect(secondPage.items.map((m) => m.id)).not.toContain(firstPage.items[0]?.id);

    const walked = await collect(cognis.iterMemories(userId, { pageSize: 2 }));
    expect(walked.map((m) => m.id).sort()).toEqual(created.map((m) => m.id).sort());
    const travel = await collect(cognis.iterMemories(userId, { category: "travel", pageSize: 1 }));
    expect(travel.map((m) => m.content)).toEqual(["Ines cycled to Porto."]);
    const notTravel = { not: { field: "category", op: "eq", value: "travel" } };
    const filtered = await collect(cognis.iterMemories(userId, { filters: notTravel, pageSize: 3 }));
    expect(filtered.map((m) => m.category)).toEqual(["hobbies", "hobbies", "hobbies", "hobbies"]);
    expect(await collect(cognis.iterMemories(userId, { category: "health" }))).toEqual([]);
  });

  it("searches with filters, agent_id, min_relevance, a profile and levers", async () => {
    const userId = newUser();
    const [apollo, gemini, mine, shared] = (await cognis.addMemories(userId, [
      { content: "Ines plans the Apollo launch.", metadata: { project: "apollo" } },
      { content: "Ines plans the Gemini launch.", metadata: { project: "gemini" }, agent_id: "pr" },
      { content: "Ines plans the Mercury launch.", agent_id: "planner" },
      { content: "Ines plans every launch carefully." },
    ])) as [Memory, Memory, Memory, Memory];

    const byProject = { field: "metadata.project", op: "eq", value: "apollo" };
    const filtered = await cognis.search(userId, "launch plans", { filters: byProject, consistency: "indexed" });
    expect(filtered.results.map((h) => h.memory.id)).toEqual([apollo.id]);
    const negated = await cognis.search(userId, "launch plans", { filters: { not: byProject } });
    expect(negated.results.map((h) => h.memory.id)).not.toContain(apollo.id);
    expect(negated.results.map((h) => h.memory.id)).toContain(gemini.id);

    const planner = await cognis.search(userId, "launch plans", { agent_id: "planner" });
    expect(new Set(planner.results.map((h) => h.memory.id))).toEqual(new Set([apollo.id, mine.id, shared.id]));

    const all = await cognis.search(userId, "Mercury launch", { profile: "paper", levers: { entities: true } });
    const top = all.results[0];
    expect(top?.memory.id).toBe(mine.id);
    expect(top?.relevance).toBeTypeOf("number");
    const floor = top?.relevance ?? 1;
    const floored = await cognis.search(userId, "Mercury launch", { min_relevance: floor });
    expect(floored.results.map((h) => h.memory.id)).toContain(mine.id);
    expect(floored.results.every((h) => (h.relevance ?? 0) >= floor)).toBe(true);
    const none = await cognis.search(userId, "Mercury launch", { min_relevance: 1 });
    expect(none.results.filter((h) => (h.relevance ?? 0) < 1)).toEqual([]);

    await expect(
      cognis.search(userId, "launch", { filters: { field: "category", op: "like", value: 1 } }),
    ).rejects.toThrow(/unknown operator/);
  });

  it("never shows a second user's memories", async () => {
    const ines = newUser();
    const omar = newUser();
    const hers = await cognis.addMemory(ines, "Ines is allergic to shellfish.");
    await cognis.addMemory(omar, "Omar is allergic to peanuts.");
    const found = await cognis.search(omar, "allergic to shellfish", { consistency: "indexed" });
    expect(found.results.length).toBeGreaterThan(0);
    expect(found.results.every((h) => h.memory.user_id === omar)).toBe(true);
    expect(found.results.map((h) => h.memory.id)).not.toContain(hers.id);
    const listed = await collect(cognis.iterMemories(omar));
    expect(listed.map((m) => m.content)).toEqual(["Omar is allergic to peanuts."]);
    await expect(cognis.getMemory(omar, hers.id)).rejects.toBeInstanceOf(NotFoundError);
    await expect(cognis.history(omar, hers.id)).rejects.toBeInstanceOf(NotFoundError);
    await expect(cognis.updateMemory(omar, hers.id, { content: "taken over" })).rejects.toBeInstanceOf(NotFoundError);
    expect((await cognis.getMemory(ines, hers.id)).content).toBe("Ines is allergic to shellfish.");
  });

  it("turns problem+json answers into typed errors carrying the server's detail", async () => {
    const userId = newUser();
    const invalid = await cognis.addMemory(userId, { content: "x", category: "no-such-category" }).catch((e: unknown) => e);
    expect(invalid).toBeInstanceOf(InvalidRequestError);
    expect(invalid).toBeInstanceOf(CognisError);
    const error = invalid as InvalidRequestError;
    expect([error.name, error.status]).toEqual(["InvalidRequestError", 400]);
    expect(error.detail).toMatch(/unknown category 'no-such-category'; expected one of: .*personal_details/);
    expect(error.problem.status).toBe(400);
    expect(error.idempotencyKey).toMatch(/^[0-9a-f-]{36}$/); // the write's key, for a resend

    const missing = await cognis.getMemory(userId, randomUUID()).catch((e: unknown) => e);
    expect(missing).toBeInstanceOf(NotFoundError);
    expect((missing as NotFoundError).status).toBe(404);

    const tooMany = await cognis.search(userId, "diary", { top_k: 10_000 }).catch((e: unknown) => e);
    expect(tooMany).toBeInstanceOf(InvalidRequestError);
    expect((tooMany as InvalidRequestError).detail).toContain("top_k");

    const stranger = new CognisClient({ baseUrl: baseUrl, apiKey: `not-${apiKey}` });
    const denied = await stranger.listMemories(userId).catch((e: unknown) => e);
    expect(denied).toBeInstanceOf(AuthenticationError);
    expect((denied as AuthenticationError).detail).toContain("X-API-Key");
  });

  it("submits messages: a job done with wait, read back by id; a dry run writes nothing", async () => {
    const userId = newUser();
    const dry = await cognis.dryRunMessages(userId, [{ content: "I started learning Finnish last month.", speaker: "Ines" }]);
    expect(dry.dry_run).toBe(true);
    expect(dry.messages[0]?.decisions.map((d) => d.operation)).toEqual(["ADD"]);
    expect((await cognis.listMemories(userId)).items).toEqual([]);

    const job = await cognis.addMessages(userId, [{ content: "I started learning Finnish last month.", speaker: "Ines" }], {
      wait: true,
    });
    expect(job.state).toBe("done");
    const decisions = job.messages.flatMap((m) => m.decisions);
    expect(decisions.map((d) => d.operation)).toEqual(["ADD"]);
    const read = await cognis.waitForJob(userId, job.job_id);
    expect([read.job_id, read.state, read.messages]).toEqual([job.job_id, "done", job.messages]);
    const found = await cognis.search(userId, "Finnish lessons", { consistency: "indexed" });
    expect(found.results[0]?.memory.id).toBe(decisions[0]?.memory_id);
  });

  it("streams the export, lists users, and erases a user", async () => {
    const userId = newUser();
    await cognis.addMemories(userId, [
      { content: "Ines plans the Apollo launch.", agent_id: "planner" },
      { content: "Ines plans the Gemini launch.", agent_id: "pr" },
    ]);
    const lines: ExportLine[] = await collect(cognis.exportMemories(userId));
    expect(lines.map((l) => l.content).sort()).toEqual(["Ines plans the Apollo launch.", "Ines plans the Gemini launch."]);
    const planner = await collect(cognis.exportMemories(userId, { agent_id: "planner", vectors: true }));
    expect(planner).toHaveLength(1);
    expect(planner[0]?.agent_id).toBe("planner");
    expect(planner[0]?.embedding).toHaveLength(768);

    // The export is the import's line format: it imports as it is into another user.
    const copy = newUser();
    const imported = await cognis.importMemories(
      copy,
      lines.map(({ user_id: _user, ...line }) => line),
    );
    expect([imported.imported, imported.failed, imported.errors]).toEqual([2, 0, []]);
    const copied = await collect(cognis.iterMemories(copy));
    expect(copied.map((m) => m.content).sort()).toEqual(lines.map((l) => l.content).sort());

    const users = await cognis.listUsers({ prefix: userId });
    expect(users.items.map((u) => [u.user_id, u.memories, u.versions])).toEqual([[userId, 2, 2]]);
    expect(users.next_cursor).toBeNull();

    const erased = await cognis.eraseUser(userId);
    expect(erased.user_id).toBe(userId);
    expect(erased.postgres["memories"]).toBe(2);
    expect(erased.writes_refused_until).toBeNull();
    expect((await cognis.listMemories(userId)).items).toEqual([]);
    expect((await cognis.listUsers({ prefix: userId })).items).toEqual([]);
    // A new life at once: the next write for the id is accepted.
    const again = await cognis.addMemory(userId, { content: "Ines plans the Artemis launch." });
    expect((await cognis.listMemories(userId)).items.map((m) => m.id)).toEqual([again.id]);
  });
});

describe("retries (a loopback proxy in front of the API answers 503, 429 or nothing)", () => {
  let proxy: Proxy;
  const retries: [number, number, unknown][] = [];
  let viaProxy: CognisClient;

  beforeAll(async () => {
    proxy = await startProxy(baseUrl);
    viaProxy = new CognisClient({
      baseUrl: proxy.url,
      apiKey,
      retry: { maxRetries: 2, backoffBaseMs: 10 },
      onRetry: (attempt, delayMs, error) => retries.push([attempt, delayMs, error]),
    });
  });
  afterAll(async () => proxy.close());

  function reset(): void {
    proxy.plan.length = 0;
    proxy.seen.length = 0;
    retries.length = 0;
  }

  it("retries a 503 after its Retry-After with the same idempotency key, and writes once", async () => {
    reset();
    const userId = newUser();
    proxy.plan.push({ answer: 503, retryAfter: "0" });
    const written = await viaProxy.addMemory(userId, "Ines waters the ferns on Mondays.");
    expect(proxy.seen.map((s) => s.method)).toEqual(["POST", "POST"]);
    const [firstKey, secondKey] = proxy.seen.map((s) => s.idempotencyKey);
    expect(firstKey).toMatch(/^[0-9a-f-]{36}$/);
    expect(secondKey).toBe(firstKey);
    expect(retries.map(([attempt, delay, error]) => [attempt, delay, (error as CognisError).status])).toEqual([[1, 0, 503]]);
    expect(retries[0]?.[2]).toBeInstanceOf(ServiceUnavailableError);
    expect((await cognis.listMemories(userId)).items.map((m) => m.id)).toEqual([written.id]);
  });

  it("retries a 429 after its Retry-After, and raises RateLimitedError when the wait is too long", async () => {
    reset();
    const userId = newUser();
    proxy.plan.push({ answer: 429, retryAfter: "1" });
    const result = await viaProxy.search(userId, "anything");
    expect(result.results).toEqual([]);
    expect(retries.map(([attempt, delay]) => [attempt, delay])).toEqual([[1, 1000]]);
    expect(retries[0]?.[2]).toBeInstanceOf(RateLimitedError);

    reset();
    proxy.plan.push({ answer: 429, retryAfter: "120" });
    const limited = await viaProxy.getMemory(userId, randomUUID()).catch((e: unknown) => e);
    expect(limited).toBeInstanceOf(RateLimitedError);
    expect((limited as RateLimitedError).retryAfterMs).toBe(120_000);
    expect((limited as RateLimitedError).detail).toBe("planned 429 from the test proxy");
    expect(proxy.seen).toHaveLength(1); // a 120 s wait is over maxDelayMs: not made

    reset();
    proxy.plan.push({ answer: 503, retryAfter: "0" }, { answer: 503, retryAfter: "0" }, { answer: 503, retryAfter: "0" });
    const down = await viaProxy.addMemory(userId, "Never written.").catch((e: unknown) => e);
    expect(down).toBeInstanceOf(ServiceUnavailableError);
    expect(proxy.seen).toHaveLength(3); // the first attempt and maxRetries: 2
    expect((down as ServiceUnavailableError).idempotencyKey).toBe(proxy.seen[0]?.idempotencyKey);
    expect((await cognis.listMemories(userId)).items).toEqual([]);
  });

  it("splits a batch refused as too much work (413) into the parts that fit, each with its key", async () => {
    reset();
    const userId = newUser();
    proxy.plan.push({ answer: 413, problem: { fitting_memories: 2, needed_ms: 90_000, deadline_ms: 55_000 } });
    const contents = ["Ines bakes rye bread.", "Ines swims at dawn.", "Ines reads Borges.", "Ines grows basil.", "Ines owns a kayak."];
    const written = await viaProxy.addMemories(userId, contents, { idempotencyKey: "ts-split" });
    expect(written.map((m) => m.content)).toEqual(contents);
    expect(proxy.seen.map((s) => s.idempotencyKey)).toEqual(["ts-split", "ts-split:0", "ts-split:2", "ts-split:4"]);
    expect(retries).toEqual([]); // a split, not a retry of the same request

    reset();
    proxy.plan.push({ answer: 413, problem: { fitting_memories: 0 } });
    const refused = await viaProxy.addMemories(userId, ["Not even one fits."]).catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(TooMuchWorkError);
    expect((refused as TooMuchWorkError).fittingMemories).toBe(0);
    expect(proxy.seen).toHaveLength(1);
  });

  it("follows a batch the server accepts as a job (202) and returns its memories", async () => {
    reset();
    const userId = newUser();
    const page = (i: number): string =>
      (`Page ${i} of Ines's travel journal. ` + "She walked the harbour, counted the gulls and wrote it all down. ".repeat(124)).slice(0, 7999).trimEnd() + ".";
    // Two long memories first (201): the model service learns its speed from them.
    expect(await cognis.addMemories(userId, [page(100), page(101)])).toHaveLength(2);
    // Thirty at 8,000 characters need tens of seconds of model time (26 s on 2 idle cores):
    // with a deadline of 5 s on the request, some fit and not all, so the API
    // answers 202 with a job (not 503 after waiting), which its worker writes.
    proxy.plan.push({ forward: true, headers: { "x-cognis-deadline-ms": "5000" } });
    const contents = Array.from({ length: 30 }, (_, i) => page(i));
    const written = await viaProxy.addMemories(userId, contents, { idempotencyKey: "ts-job" });
    expect(written.map((m) => m.content)).toEqual(contents);
    expect(new Set(written.map((m) => m.user_id))).toEqual(new Set([userId]));
    const polls = proxy.seen.filter((s) => s.method === "GET" && s.path.includes("/memories/batch/jobs/"));
    expect(polls.length).toBeGreaterThan(0); // the 202 path: the client read the job
    const jobId = polls[0]?.path.split("/").pop() ?? "";
    const job = await cognis.getBatchJob(userId, jobId);
    expect([job.status, job.memories, job.items?.map((m) => m.id)]).toEqual(["done", 30, written.map((m) => m.id)]);
    expect(await cognis.getBatchJob(newUser(), jobId).catch((e: unknown) => e)).toBeInstanceOf(NotFoundError);
  }, 300_000);

  it("retries a write whose answer was lost with its key, and it happens once", async () => {
    reset();
    const userId = newUser();
    proxy.plan.push({ forwardThenDrop: true });
    const written = await viaProxy.addMemory(userId, "Ines repairs clocks.");
    expect(proxy.seen).toHaveLength(2);
    expect(proxy.seen[1]?.idempotencyKey).toBe(proxy.seen[0]?.idempotencyKey);
    expect(retries).toHaveLength(1);
    const listed = await cognis.listMemories(userId);
    expect(listed.items.map((m) => m.id)).toEqual([written.id]);
  });

  it("with no retries left, NoAnswerError says the write may have happened and carries its key", async () => {
    reset();
    const userId = newUser();
    const once = new CognisClient({ baseUrl: proxy.url, apiKey, retry: { maxRetries: 0 } });
    proxy.plan.push({ forwardThenDrop: true });
    const lost = await once.addMemory(userId, "Ines speaks Basque.").catch((e: unknown) => e);
    expect(lost).toBeInstanceOf(NoAnswerError);
    const error = lost as NoAnswerError;
    expect(error.mayHaveWritten).toBe(true);
    expect(error.idempotencyKey).toBe(proxy.seen[0]?.idempotencyKey);
    expect(error.detail).toContain(`idempotencyKey: "${error.idempotencyKey}"`);
    // It did happen; sending it again with the key replays it instead of writing twice.
    const [stored] = (await cognis.listMemories(userId)).items;
    const resent = await cognis.addMemory(userId, "Ines speaks Basque.", { idempotencyKey: error.idempotencyKey });
    expect(resent.id).toBe(stored?.id);
    expect((await cognis.listMemories(userId)).items).toHaveLength(1);
  });

  it("a refused connection is NoAnswerError that did not write; a timeout may have", async () => {
    const port = await new Promise<number>((resolve) => {
      const probe = createServer().listen(0, "127.0.0.1", () => {
        const { port } = probe.address() as { port: number };
        probe.close(() => resolve(port));
      });
    });
    const nowhere = new CognisClient({ baseUrl: `http://127.0.0.1:${port}`, apiKey, retry: { maxRetries: 0 } });
    const refused = await nowhere.addMemory(newUser(), "x").catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(NoAnswerError);
    expect((refused as NoAnswerError).mayHaveWritten).toBe(false);

    const silent = createServer(() => {}); // accepts, never answers
    await new Promise<void>((resolve) => silent.listen(0, "127.0.0.1", resolve));
    const silentPort = (silent.address() as { port: number }).port;
    const impatient = new CognisClient({
      baseUrl: `http://127.0.0.1:${silentPort}`,
      apiKey,
      timeoutMs: 200,
      retry: { maxRetries: 0 },
    });
    const timedOut = await impatient.addMemory(newUser(), "x").catch((e: unknown) => e);
    silent.close();
    expect(timedOut).toBeInstanceOf(NoAnswerError);
    expect((timedOut as NoAnswerError).mayHaveWritten).toBe(true);
    expect((timedOut as NoAnswerError).detail).toContain("TimeoutError");
  });
});

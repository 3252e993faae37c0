// CognisClient: the Cognis Memory REST API over fetch, with the Python client's surface
// (clients/python/cognis_client): retries after Retry-After, one idempotency key per logical
// write (reused by its retries), and every failure a CognisError.
import { randomUUID } from "node:crypto";

import {
  BatchJobFailedError,
  CognisError,
  ConflictError,
  NoAnswerError,
  ServiceUnavailableError,
  TooMuchWorkError,
  errorFromResponse,
} from "./errors.js";
import type { components, operations } from "./schema.js";

type Schemas = components["schemas"];
type QueryOf<K extends keyof operations> = NonNullable<operations[K]["parameters"]["query"]>;

export type Memory = Schemas["MemoryOut"];
export type MemoryInput = Schemas["MemoryCreate"];
export type MemoryChanges = Schemas["MemoryUpdate"];
export type MemoryPage = Schemas["MemoryList"];
export type History = Schemas["HistoryOut"];
export type SearchHit = Schemas["SearchHitOut"];
export type SearchResult = Schemas["SearchOut"];
export type Message = Schemas["MessageIn"];
export type Job = Schemas["JobOut"];
/** A batch of memories accepted as a job (202), with its memories (`items`) once done. */
export type BatchJob = Schemas["BatchJobOut"];
export type Decision = Schemas["DecisionOut"];
export type DryRun = Schemas["DryRunOut"];
export type UserSummary = Schemas["UserSummaryOut"];
export type UserPage = Schemas["UserList"];
export type Erasure = Schemas["EraseOut"];
/** What `deleteMemories` ended: each memory's current version, its history kept. */
export type MemoriesDeleted = Schemas["MemoriesDeletedOut"];
export type ImportSummary = Schemas["ImportSummaryOut"];
export type Context = Schemas["ContextOut"];
export type Profile = Schemas["ProfileOut"];
export type Entity = Schemas["EntityOut"];
export type EntityPage = Schemas["EntityList"];
export type EntityMemories = Schemas["EntityMemoriesOut"];
/** The filter language (docs/api.md, "Filters"): a clause `{ field, op, value }` or
 * `{ and: [...] }`, `{ or: [...] }`, `{ not: {...} }`. */
export type Filter = Record<string, unknown>;
/** Options of `search` (all optional; the server's defaults apply). */
export type SearchOptions = Omit<Schemas["SearchBody"], "query"> & CallOptions;
export type ContextOptions = Omit<Schemas["ContextBody"], "query"> & CallOptions;
/** Which memories `listMemories` and `iterMemories` return (all optional). */
export type MemoryFilters = Omit<QueryOf<"V1UsersUserIdMemoriesListMemories">, "filters" | "limit" | "cursor"> & {
  filters?: Filter | undefined;
};
export type ListOptions = MemoryFilters & { limit?: number; cursor?: string | null } & CallOptions;
/** Which memories `deleteMemories` ends: the list's filters, but `agent_id` / `run_id` name
 * exactly that agent's or run's memories (not the shared ones); no filter needs `all: true`. */
export type DeleteOptions = Omit<
  QueryOf<"V1UsersUserIdMemoriesDeleteMemories">,
  "filters" | "wait_for" | "wait_timeout_ms"
> & { filters?: Filter | undefined } & WriteOptions;
/** Options of `profile`: the list's filters, and how many memories of each category. */
export type ProfileOptions = Omit<QueryOf<"V1UsersUserIdProfileProfile">, "filters"> & {
  filters?: Filter | undefined;
} & CallOptions;
/** Options of `entities`: a type, a name or alias, the memories counted (the list's
 * filters), and the page. */
export type EntityOptions = Omit<QueryOf<"V1UsersUserIdEntitiesListEntities">, "filters"> & {
  filters?: Filter | undefined;
} & CallOptions;
/** Options of `entityMemories`: which of the entity's memories, and how many. */
export type EntityMemoryOptions = Omit<
  QueryOf<"V1UsersUserIdEntitiesEntityIdMemoriesEntityMemories">,
  "filters"
> & { filters?: Filter | undefined } & CallOptions;
/** Options of `exportMemories`: as the list's, and which versions, and vectors. */
export type ExportOptions = Omit<QueryOf<"V1UsersUserIdExportExportMemories">, "filters"> & {
  filters?: Filter | undefined;
} & CallOptions;
/** One line of an export: a memory in the import's line format. */
export type ExportLine = { content: string } & Record<string, unknown>;

export interface CallOptions {
  /** Cancels the call (and its retries). */
  signal?: AbortSignal | undefined;
}

/** Options of `updateMemory` and `deleteMemory`. */
export interface ChangeOptions extends WriteOptions {
  /** The version read (a Memory, or its `version_id`): the change is made only while it is
   * the memory's current version, else PreconditionFailedError (412) and nothing written.
   * Omitted: the change applies to whichever version is current (last writer wins). */
  ifMatch?: Memory | string | undefined;
}

export interface WriteOptions extends CallOptions {
  /** The key of this logical write (default: a new one, reused by the client's own retries);
   * the same key later replays the first answer, never writes again. */
  idempotencyKey?: string | undefined;
  /** "indexed": answer once the write is searchable by BM25 too, within `waitTimeoutMs`. */
  waitFor?: "indexed" | undefined;
  waitTimeoutMs?: number | undefined;
}

/** Retries of 503 and 429 answers, of 409 `idempotency_key_in_use`, and of attempts whose
 * answer never came (timeouts, dropped connections) when the call is safe to repeat: after the
 * server's Retry-After when it sends one, else exponential backoff with jitter. A wait longer
 * than `maxDelayMs` is not made: the error is thrown. */
export interface RetryPolicy {
  maxRetries: number;
  backoffBaseMs: number;
  maxDelayMs: number;
}

export const DEFAULT_RETRY: RetryPolicy = { maxRetries: 3, backoffBaseMs: 500, maxDelayMs: 30_000 };
export const DEFAULT_TIMEOUT_MS = 60_000;
/** How long `addMemories` waits for a batch the server accepted as a job (202) by default. */
export const BATCH_JOB_TIMEOUT_MS = 900_000;
export const IDEMPOTENCY_KEY_HEADER = "Idempotency-Key";

/** Called before each retry: attempt number from 1, milliseconds about to be waited, and the
 * error (a CognisError, or the transport's error of an attempt that got no answer). */
export type OnRetry = (attempt: number, delayMs: number, error: unknown) => void;

export interface CognisClientOptions {
  baseUrl: string;
  apiKey?: string | undefined;
  /** Per attempt: until the whole answer is read (for an export: until its headers). */
  timeoutMs?: number | undefined;
  retry?: Partial<RetryPolicy> | undefined;
  onRetry?: OnRetry | undefined;
  /** Another fetch (a proxy agent, a test double); default: the global one. */
  fetch?: typeof fetch | undefined;
}

/** A key for one logical write: sent with every attempt of it, so the server does it once. */
export function newIdempotencyKey(): string {
  return randomUUID();
}

/** One logical API call: every attempt (the client's retries) sends the same request,
 * idempotency key included. */
interface Call {
  method: "GET" | "POST" | "PATCH" | "DELETE";
  path: string;
  query?: Record<string, unknown>;
  body?: unknown;
  /** A body sent as it is (the import's JSON Lines), with its content type. */
  raw?: { text: string; contentType: string };
  idempotencyKey?: string | undefined;
  /** Other request headers (If-Match). */
  headers?: Record<string, string>;
  /** Not a write, or one whose repetition changes nothing (a search, an erase). */
  safeToRepeat?: boolean;
  signal?: AbortSignal | undefined;
}

function repeatable(call: Call): boolean {
  return call.method === "GET" || call.safeToRepeat === true || call.idempotencyKey !== undefined;
}

function user(userId: string): string {
  return `/v1/users/${encodeURIComponent(userId)}`;
}

function memory(userId: string, memoryId: string): string {
  return `${user(userId)}/memories/${encodeURIComponent(memoryId)}`;
}

/** The If-Match header naming a version: a Memory's (`version_id`) or a version id. */
function ifMatch(version: Memory | string | undefined): Record<string, string> {
  if (version === undefined) return {};
  return { "If-Match": `"${typeof version === "string" ? version : version.version_id}"` };
}

function writeQuery(options: WriteOptions): Record<string, unknown> {
  return { wait_for: options.waitFor, wait_timeout_ms: options.waitTimeoutMs };
}

function listQuery<T extends { filters?: Filter | undefined; signal?: AbortSignal | undefined }>(
  options: T,
): Record<string, unknown> {
  const { filters, signal: _signal, ...rest } = options;
  return { ...rest, filters: filters === undefined ? undefined : JSON.stringify(filters) };
}

function asMemoryInput(input: MemoryInput | string): MemoryInput {
  return typeof input === "string" ? { content: input } : input;
}

function asMessage(input: Message | string): Message {
  return typeof input === "string" ? { content: input } : input;
}

/** No answer at all: fetch threw, or the body could not be read. Only a connection that was
 * never made proves the request did not reach the server. */
function neverSent(error: unknown): boolean {
  const cause = error instanceof Error ? (error.cause as { code?: unknown } | undefined) : undefined;
  const code = cause?.code;
  return code === "ECONNREFUSED" || code === "ENOTFOUND" || code === "EAI_AGAIN";
}

function sleep(ms: number, signal: AbortSignal | undefined): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason);
    const timer = setTimeout(() => {
      signal?.removeEventListener("abort", onAbort);
      resolve();
    }, ms);
    const onAbort = (): void => {
      clearTimeout(timer);
      reject(signal?.reason);
    };
    signal?.addEventListener("abort", onAbort, { once: true });
  });
}

export class CognisClient {
  readonly baseUrl: string;
  readonly retry: RetryPolicy;
  private readonly apiKey: string | undefined;
  private readonly timeoutMs: number;
  private readonly onRetry: OnRetry | undefined;
  private readonly fetch: typeof fetch;

  constructor(options: CognisClientOptions) {
    this.baseUrl = options.baseUrl.replace(/\/+$/, "");
    this.apiKey = options.apiKey;
    this.timeoutMs = options.timeoutMs ?? DEFAULT_TIMEOUT_MS;
    this.retry = { ...DEFAULT_RETRY, ...options.retry };
    this.onRetry = options.onRetry;
    this.fetch = options.fetch ?? globalThis.fetch;
  }

  /** One new memory (a string: its content). */
  async addMemory(userId: string, input: MemoryInput | string, options: WriteOptions = {}): Promise<Memory> {
    return this.json<Memory>({
      method: "POST",
      path: `${user(userId)}/memories`,
      query: writeQuery(options),
      body: asMemoryInput(input),
      idempotencyKey: options.idempotencyKey ?? newIdempotencyKey(),
      signal: options.signal,
    });
  }

  /** Several new memories in one transaction: all or none. A batch the server accepts as a job
   * (202: more model work than its deadline allows) is waited for, its status polled for up to
   * `jobTimeoutMs`, and its memories returned as a 201's are; a failed job throws
   * BatchJobFailedError. A batch an older server refuses as too much work (413) is sent again
   * in the parts it says would fit, one transaction each, in order (each part's idempotency
   * key is the batch's with its offset). */
  async addMemories(
    userId: string,
    inputs: (MemoryInput | string)[],
    options: WriteOptions & { jobTimeoutMs?: number } = {},
  ): Promise<Memory[]> {
    let batch: Schemas["MemoryBatchOut"] | BatchJob;
    try {
      batch = await this.json<Schemas["MemoryBatchOut"] | BatchJob>({
        method: "POST",
        path: `${user(userId)}/memories/batch`,
        query: writeQuery(options),
        body: { memories: inputs.map(asMemoryInput) },
        idempotencyKey: options.idempotencyKey ?? newIdempotencyKey(),
        signal: options.signal,
      });
    } catch (error) {
      const fitting = error instanceof TooMuchWorkError ? error.fittingMemories : undefined;
      if (fitting === undefined || fitting < 1 || fitting >= inputs.length) throw error;
      const memories: Memory[] = [];
      for (let start = 0; start < inputs.length; start += fitting) {
        const key = options.idempotencyKey === undefined ? undefined : `${options.idempotencyKey}:${start}`;
        const part = inputs.slice(start, start + fitting);
        memories.push(...(await this.addMemories(userId, part, { ...options, idempotencyKey: key })));
      }
      return memories;
    }
    if (!("job_id" in batch)) return batch.items;
    const { jobTimeoutMs = BATCH_JOB_TIMEOUT_MS, signal } = options;
    const job = await this.waitForBatchJob(userId, batch.job_id, { timeoutMs: jobTimeoutMs, signal });
    if (job.status !== "done" || job.items == null) throw new BatchJobFailedError(job);
    return job.items;
  }

  /** A batch create's job (a 202's), with its memories once done. */
  async getBatchJob(userId: string, jobId: string, options: CallOptions = {}): Promise<BatchJob> {
    return this.json<BatchJob>({
      method: "GET",
      path: `${user(userId)}/memories/batch/jobs/${encodeURIComponent(jobId)}`,
      signal: options.signal,
    });
  }

  /** Polls the batch job until it is done or failed; throws a CognisError when `timeoutMs`
   * passes (the job carries on server-side). */
  async waitForBatchJob(
    userId: string,
    jobId: string,
    options: CallOptions & { timeoutMs?: number; intervalMs?: number } = {},
  ): Promise<BatchJob> {
    const { timeoutMs = BATCH_JOB_TIMEOUT_MS, intervalMs = 500, signal } = options;
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const job = await this.getBatchJob(userId, jobId, { signal });
      if (job.status === "done" || job.status === "failed") return job;
      if (Date.now() >= deadline) {
        const detail = `batch job ${jobId} is still ${job.status} after ${timeoutMs} ms; wait again, or read it with getBatchJob`;
        throw new CognisError(0, "Job not finished", detail, { job });
      }
      await sleep(intervalMs, signal);
    }
  }

  /** By the memory's id, its current version (its last, `is_current` false, once deleted);
   * by a version's id, that version. */
  async getMemory(userId: string, memoryId: string, options: CallOptions = {}): Promise<Memory> {
    return this.json<Memory>({ method: "GET", path: memory(userId, memoryId), signal: options.signal });
  }

  /** One page of memories, newest first; `next_cursor` leads to the next. */
  async listMemories(userId: string, options: ListOptions = {}): Promise<MemoryPage> {
    return this.json<MemoryPage>({
      method: "GET",
      path: `${user(userId)}/memories`,
      query: listQuery(options),
      signal: options.signal,
    });
  }

  /** Every memory matching the filters of `listMemories`, page after page. */
  async *iterMemories(
    userId: string,
    options: MemoryFilters & CallOptions & { pageSize?: number } = {},
  ): AsyncGenerator<Memory, void, undefined> {
    const { pageSize = 100, ...filters } = options;
    let cursor: string | null = null;
    do {
      const page: MemoryPage = await this.listMemories(userId, { ...filters, limit: pageSize, cursor });
      yield* page.items;
      cursor = page.next_cursor;
    } while (cursor !== null);
  }

  /** A new version of the memory `memoryId` (its id, or any of its versions') with the given
   * fields changed; it keeps the memory's `id`. `ifMatch`: see ChangeOptions. */
  async updateMemory(
    userId: string,
    memoryId: string,
    changes: MemoryChanges,
    options: ChangeOptions = {},
  ): Promise<Memory> {
    return this.json<Memory>({
      method: "PATCH",
      path: memory(userId, memoryId),
      query: writeQuery(options),
      body: changes,
      idempotencyKey: options.idempotencyKey ?? newIdempotencyKey(),
      headers: ifMatch(options.ifMatch),
      signal: options.signal,
    });
  }

  /** Ends the memory `memoryId` (its id, or any of its versions'): its current version ends
   * and is returned, its history stays; `eventEnd`: when the fact stopped being true. */
  async deleteMemory(
    userId: string,
    memoryId: string,
    options: ChangeOptions & { eventEnd?: string | undefined } = {},
  ): Promise<Memory> {
    return this.json<Memory>({
      method: "DELETE",
      path: memory(userId, memoryId),
      query: { ...writeQuery(options), event_end: options.eventEnd },
      idempotencyKey: options.idempotencyKey ?? newIdempotencyKey(),
      headers: ifMatch(options.ifMatch),
      signal: options.signal,
    });
  }

  /** End every memory the filters keep, as `deleteMemory` ends one: each keeps its history.
   * No filter: `all: true`, every memory of the user. Not an erase (`eraseUser` removes). */
  async deleteMemories(userId: string, options: DeleteOptions): Promise<MemoriesDeleted> {
    const { idempotencyKey, waitFor, waitTimeoutMs, ...filters } = options;
    return this.json<MemoriesDeleted>({
      method: "DELETE",
      path: `${user(userId)}/memories`,
      query: { ...listQuery(filters), ...writeQuery({ waitFor, waitTimeoutMs }) },
      idempotencyKey: idempotencyKey ?? newIdempotencyKey(),
      signal: options.signal,
    });
  }

  /** Every version of the memory, oldest first (by its id or any of its versions'). */
  async history(userId: string, memoryId: string, options: CallOptions = {}): Promise<History> {
    return this.json<History>({ method: "GET", path: `${memory(userId, memoryId)}/history`, signal: options.signal });
  }

  /** The 8-stage retrieval; `explain: true` adds every stage's rank and score per hit. */
  async search(userId: string, query: string, options: SearchOptions = {}): Promise<SearchResult> {
    const { signal, ...body } = options;
    return this.json<SearchResult>({
      method: "POST",
      path: `${user(userId)}/search`,
      body: { query, ...body },
      safeToRepeat: true,
      signal,
    });
  }

  /** A prompt-ready block within `max_tokens`: the query's hits, recent changes, then the
   * user's stable facts (without a query, the last two), and the memories it cites. */
  async context(userId: string, query?: string | null, options: ContextOptions = {}): Promise<Context> {
    const { signal, ...body } = options;
    return this.json<Context>({
      method: "POST",
      path: `${user(userId)}/context`,
      body: query == null ? body : { query, ...body },
      safeToRepeat: true,
      signal,
    });
  }

  /** The user's current memories by category, newest first, each with what it replaced. */
  async profile(userId: string, options: ProfileOptions = {}): Promise<Profile> {
    return this.json<Profile>({
      method: "GET",
      path: `${user(userId)}/profile`,
      query: listQuery(options),
      signal: options.signal,
    });
  }

  /** The named things of the user's memories (people, places, ...), by name: a page. */
  async entities(userId: string, options: EntityOptions = {}): Promise<EntityPage> {
    return this.json<EntityPage>({
      method: "GET",
      path: `${user(userId)}/entities`,
      query: listQuery(options),
      signal: options.signal,
    });
  }

  /** An entity and the current memories that name it, newest first. */
  async entityMemories(
    userId: string,
    entityId: string,
    options: EntityMemoryOptions = {},
  ): Promise<EntityMemories> {
    return this.json<EntityMemories>({
      method: "GET",
      path: `${user(userId)}/entities/${encodeURIComponent(entityId)}/memories`,
      query: listQuery(options),
      signal: options.signal,
    });
  }

  /** Messages to remember: queued for extraction (a job), or done before the answer with
   * `wait: true`. */
  async addMessages(
    userId: string,
    messages: (Message | string)[],
    options: WriteOptions & { wait?: boolean | undefined } = {},
  ): Promise<Job> {
    return this.json<Job>({
      method: "POST",
      path: `${user(userId)}/messages`,
      query: { ...writeQuery(options), wait: options.wait },
      body: { messages: messages.map(asMessage) },
      idempotencyKey: options.idempotencyKey ?? newIdempotencyKey(),
      signal: options.signal,
    });
  }

  /** What the messages would change, decided but not written. */
  async dryRunMessages(userId: string, messages: (Message | string)[], options: CallOptions = {}): Promise<DryRun> {
    return this.json<DryRun>({
      method: "POST",
      path: `${user(userId)}/messages`,
      query: { dry_run: true },
      body: { messages: messages.map(asMessage) },
      safeToRepeat: true,
      signal: options.signal,
    });
  }

  async getJob(userId: string, jobId: string, options: CallOptions = {}): Promise<Job> {
    return this.json<Job>({
      method: "GET",
      path: `${user(userId)}/jobs/${encodeURIComponent(jobId)}`,
      signal: options.signal,
    });
  }

  /** Polls the job until it is done or failed; throws a CognisError when `timeoutMs` passes. */
  async waitForJob(
    userId: string,
    jobId: string,
    options: CallOptions & { timeoutMs?: number; intervalMs?: number } = {},
  ): Promise<Job> {
    const { timeoutMs = 60_000, intervalMs = 250, signal } = options;
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const job = await this.getJob(userId, jobId, { signal });
      if (job.state === "done" || job.state === "failed") return job;
      if (Date.now() >= deadline) {
        const detail = `job ${jobId} is still ${job.state} after ${timeoutMs} ms; wait again, or read it with getJob`;
        throw new CognisError(0, "Job not finished", detail, { job });
      }
      await sleep(intervalMs, signal);
    }
  }

  /** Erases the user: every memory, version, message and job, in both stores. */
  async eraseUser(userId: string, options: CallOptions = {}): Promise<Erasure> {
    return this.json<Erasure>({ method: "DELETE", path: user(userId), safeToRepeat: true, signal: options.signal });
  }

  /** The user's memories as they stream in (JSON Lines, the import's line format), one object
   * per line. Retries happen before the first line only. */
  async *exportMemories(userId: string, options: ExportOptions = {}): AsyncGenerator<ExportLine, void, undefined> {
    const call: Call = { method: "GET", path: `${user(userId)}/export`, query: listQuery(options), signal: options.signal };
    const response = await this.send(call, true);
    if (response.body === null) return;
    const decoder = new TextDecoder();
    let buffered = "";
    try {
      for await (const chunk of response.body as unknown as AsyncIterable<Uint8Array>) {
        buffered += decoder.decode(chunk, { stream: true });
        let newline: number;
        while ((newline = buffered.indexOf("\n")) >= 0) {
          const line = buffered.slice(0, newline).trim();
          buffered = buffered.slice(newline + 1);
          if (line !== "") yield JSON.parse(line) as ExportLine;
        }
      }
    } catch (error) {
      if (error instanceof SyntaxError) throw error;
      throw new NoAnswerError(error, false, undefined);
    }
    buffered += decoder.decode();
    if (buffered.trim() !== "") yield JSON.parse(buffered) as ExportLine;
  }

  /** Imports memories: JSON Lines text, or objects (one line each). Not repeated after an
   * attempt without an answer (an import has no idempotency key). */
  async importMemories(
    userId: string,
    lines: string | Record<string, unknown>[],
    options: CallOptions & { format?: "auto" | "jsonl" | "mem0"; batchSize?: number } = {},
  ): Promise<ImportSummary> {
    const text = typeof lines === "string" ? lines : lines.map((line) => JSON.stringify(line)).join("\n") + "\n";
    return this.json<ImportSummary>({
      method: "POST",
      path: `${user(userId)}/import`,
      query: { format: options.format, batch_size: options.batchSize },
      raw: { text, contentType: "application/x-ndjson" },
      signal: options.signal,
    });
  }

  /** One page of the tenant's users (by id), with memory counts and last change. */
  async listUsers(
    options: CallOptions & { prefix?: string | undefined; limit?: number; cursor?: string | null } = {},
  ): Promise<UserPage> {
    const { signal, ...query } = options;
    return this.json<UserPage>({ method: "GET", path: "/v1/users", query, signal });
  }

  private async json<T>(call: Call): Promise<T> {
    const response = await this.send(call, false);
    return JSON.parse(await response.text()) as T;
  }

  /** Sends the call until it succeeds or must not be retried. The answer's body is read
   * within the attempt's timeout (`stream`: only its headers are waited for). */
  private async send(call: Call, stream: boolean): Promise<Response> {
    for (let attempt = 0; ; attempt++) {
      let delay: number;
      const controller = new AbortController();
      const timer = setTimeout(
        () => controller.abort(new DOMException(`no answer within ${this.timeoutMs} ms`, "TimeoutError")),
        this.timeoutMs,
      );
      const stopOnCancel = (): void => controller.abort(call.signal?.reason);
      if (call.signal?.aborted) stopOnCancel();
      call.signal?.addEventListener("abort", stopOnCancel, { once: true });
      const signal = controller.signal;
      try {
        const response = await this.fetch(this.url(call), this.init(call, signal));
        if (response.ok) {
          if (stream) return response;
          const text = await response.text();
          return new Response(text, { status: response.status, headers: response.headers });
        }
        const error = errorFromResponse(response, await response.text());
        if (!this.retryable(call, error)) throw this.giveUp(call, error);
        delay = this.delayMs(call, attempt, error, error instanceof ServiceUnavailableError ? error.retryAfterMs : undefined);
      } catch (error) {
        if (error instanceof CognisError) throw error;
        if (call.signal?.aborted || !repeatable(call)) throw this.giveUp(call, error);
        delay = this.delayMs(call, attempt, error, undefined);
      } finally {
        clearTimeout(timer);
        call.signal?.removeEventListener("abort", stopOnCancel);
      }
      await sleep(delay, call.signal);
    }
  }

  private url(call: Call): string {
    const url = new URL(this.baseUrl + call.path);
    for (const [name, value] of Object.entries(call.query ?? {})) {
      if (value !== undefined && value !== null) url.searchParams.set(name, String(value));
    }
    return url.toString();
  }

  private init(call: Call, signal: AbortSignal): RequestInit {
    const headers: Record<string, string> = { Accept: "application/json", ...call.headers };
    if (this.apiKey) headers["X-API-Key"] = this.apiKey;
    if (call.idempotencyKey !== undefined) headers[IDEMPOTENCY_KEY_HEADER] = call.idempotencyKey;
    let body: string | undefined;
    if (call.raw !== undefined) {
      headers["Content-Type"] = call.raw.contentType;
      body = call.raw.text;
    } else if (call.body !== undefined) {
      headers["Content-Type"] = "application/json";
      body = JSON.stringify(call.body);
    }
    return { method: call.method, headers, body: body ?? null, signal };
  }

  private retryable(call: Call, error: CognisError): boolean {
    if (error instanceof ServiceUnavailableError) return true; // 503, and 429 (RateLimitedError)
    // The first attempt with this key is still running on the server: its answer will come.
    const inUse = error.problem["code"] === "idempotency_key_in_use";
    return error instanceof ConflictError && inUse && call.idempotencyKey !== undefined;
  }

  /** Milliseconds to wait before the next attempt; throws when there must be none. */
  private delayMs(call: Call, attempt: number, error: unknown, retryAfter: number | undefined): number {
    const delay =
      retryAfter ?? this.retry.backoffBaseMs * 2 ** attempt * (0.5 + Math.random() / 2);
    if (attempt >= this.retry.maxRetries || delay > this.retry.maxDelayMs) throw this.giveUp(call, error);
    this.onRetry?.(attempt + 1, delay, error);
    return delay;
  }

  /** The error that ends the call, carrying the write's key (an attempt that got no answer
   * becomes NoAnswerError, with the transport's error as its cause). */
  private giveUp(call: Call, error: unknown): CognisError {
    if (error instanceof CognisError) {
      error.idempotencyKey = call.idempotencyKey;
      return error;
    }
    const write = call.method !== "GET" && call.safeToRepeat !== true;
    return new NoAnswerError(error, write && !neverSent(error), call.idempotencyKey);
  }
}

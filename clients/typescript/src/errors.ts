// The server's application/problem+json answers as exceptions, one class per kind of failure,
// and NoAnswerError for an attempt that got none: every failure of a call is a CognisError.
import type { components } from "./schema.js";

/** The body of an error answer (RFC 9457), as the server documents it; may carry more. */
export type Problem = Partial<components["schemas"]["Problem"]> & Record<string, unknown>;

/** An error answer of the API: `detail` is the server's explanation, `problem` its body.
 * `idempotencyKey`: the failed write's key, when it had one; sending the write again with it
 * (`{ idempotencyKey }`) never writes twice. */
export class CognisError extends Error {
  readonly status: number;
  readonly title: string;
  readonly detail: string;
  readonly problem: Problem;
  idempotencyKey: string | undefined;

  constructor(status: number, title: string, detail: string, problem: Problem = {}, options?: ErrorOptions) {
    super(`${status} ${title}: ${detail}`, options);
    this.name = new.target.name; // the subclass's: "NotFoundError", ...
    this.status = status;
    this.title = title;
    this.detail = detail;
    this.problem = problem;
  }
}

/** 400 or 422: the request itself is wrong; `problem.errors` lists fields when known. */
export class InvalidRequestError extends CognisError {}

/** 401: no API key, or one the server does not accept. */
export class AuthenticationError extends CognisError {}

/** 404: no such memory or job for this user (or it belongs to another user). */
export class NotFoundError extends CognisError {}

/** 409: the request conflicts with the current state (e.g. updating a deleted memory). */
export class ConflictError extends CognisError {}

/** 412: `ifMatch` named a version that is no longer the memory's current one (another writer
 * replaced it); nothing was written. `currentVersionId`: the version now current. A
 * ConflictError, as a superseded version was before memory ids lasted. */
export class PreconditionFailedError extends ConflictError {
  get currentVersionId(): string | undefined {
    const current = this.problem["current_version_id"];
    return typeof current === "string" ? current : undefined;
  }
}

/** 413: a batch whose memories need more model time than the server's whole deadline, even on
 * an idle model; `fittingMemories` of them would fit. `addMemories` splits by itself on it;
 * sending the same batch again would fail the same way. */
export class TooMuchWorkError extends CognisError {
  get fittingMemories(): number | undefined {
    const fitting = this.problem["fitting_memories"];
    return typeof fitting === "number" && Number.isInteger(fitting) ? fitting : undefined;
  }
}

/** A batch the server accepted as a job (202) failed: none of its memories was written.
 * `job`: the job, `job.error` why; sending the batch again is a new write. */
export class BatchJobFailedError extends CognisError {
  readonly job: components["schemas"]["BatchJobOut"];

  constructor(job: components["schemas"]["BatchJobOut"]) {
    const detail = `batch job ${job.job_id} failed after ${job.attempts} attempt(s): ${job.error ?? "no error given"}`;
    super(0, "Batch job failed", detail, {});
    this.job = job;
  }
}

/** 503: a dependency is down; retried by the client, thrown when the retries run out.
 * `retryAfterMs`: the server's Retry-After, when it sent one. */
export class ServiceUnavailableError extends CognisError {
  readonly retryAfterMs: number | undefined;

  constructor(status: number, title: string, detail: string, problem: Problem, retryAfterMs: number | undefined) {
    super(status, title, detail, problem);
    this.retryAfterMs = retryAfterMs;
  }
}

/** 429: this key sent more requests than its rate allows; retried by the client after the
 * server's Retry-After, thrown when the retries run out (or the wait is too long). */
export class RateLimitedError extends ServiceUnavailableError {}

/** Any other 5xx. */
export class ServerError extends CognisError {}

/** No answer came: a timeout, or a connection refused or dropped. `mayHaveWritten`: the call
 * was a write whose request may have reached the server, so it may have happened; send it
 * again with `idempotencyKey` to be sure it happens exactly once. The transport's own error
 * is the `cause`. */
export class NoAnswerError extends CognisError {
  readonly mayHaveWritten: boolean;

  constructor(error: unknown, mayHaveWritten: boolean, idempotencyKey: string | undefined) {
    let advice = "";
    if (mayHaveWritten) {
      advice = " The write may or may not have happened.";
      if (idempotencyKey !== undefined) {
        advice += ` Send it again with idempotencyKey: "${idempotencyKey}".`;
      }
    }
    super(0, "No answer", `no answer from the service (${describe(error)}).${advice}`, {}, { cause: error });
    this.mayHaveWritten = mayHaveWritten;
    this.idempotencyKey = idempotencyKey;
  }
}

function describe(error: unknown): string {
  if (!(error instanceof Error)) return String(error);
  // fetch's TypeError("fetch failed") hides the socket's error in its cause.
  const cause = error.cause instanceof Error ? `: ${error.cause.message}` : "";
  return `${error.name}: ${error.message}${cause}`;
}

const BY_STATUS: Record<number, typeof CognisError> = {
  400: InvalidRequestError,
  401: AuthenticationError,
  404: NotFoundError,
  409: ConflictError,
  412: PreconditionFailedError,
  413: TooMuchWorkError,
  422: InvalidRequestError,
};

/** Retry-After in milliseconds: either delta-seconds or an HTTP date (RFC 9110 §10.2.3). */
export function retryAfterMs(headers: Headers, now: number = Date.now()): number | undefined {
  const value = headers.get("Retry-After")?.trim();
  if (value === undefined || value === "") return undefined;
  if (/^\d+(\.\d+)?$/.test(value)) return Number(value) * 1000;
  const when = Date.parse(value);
  return Number.isNaN(when) ? undefined : Math.max(0, when - now);
}

/** The error a non-2xx answer stands for; `text` is its body. */
export function errorFromResponse(response: Response, text: string): CognisError {
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch {
    body = undefined;
  }
  const problem: Problem = body !== null && typeof body === "object" && !Array.isArray(body) ? (body as Problem) : {};
  const status = response.status;
  const title = String(problem.title || response.statusText || "HTTP error");
  const detail = String(problem.detail || text.slice(0, 500));
  if (status === 429 || status === 503) {
    const Busy = status === 429 ? RateLimitedError : ServiceUnavailableError;
    return new Busy(status, title, detail, problem, retryAfterMs(response.headers));
  }
  const Class = BY_STATUS[status] ?? (status >= 500 ? ServerError : CognisError);
  return new Class(status, title, detail, problem);
}

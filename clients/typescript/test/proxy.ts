// A loopback HTTP server in front of the real API, for the retry paths only: each request
// takes the next planned step (answer with a status, Retry-After and problem fields, forward to
// the API, with extra headers if given, or
// forward and then drop the connection so the answer is lost); with no steps left it forwards.
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";

export type Step =
  | { answer: number; retryAfter?: string; problem?: Record<string, unknown> }
  | { forward: true; headers?: Record<string, string> }
  | { forwardThenDrop: true };

export interface Seen {
  method: string;
  path: string;
  idempotencyKey: string | undefined;
}

export interface Proxy {
  url: string;
  plan: Step[];
  seen: Seen[];
  close(): Promise<void>;
}

async function forward(
  upstream: string,
  request: IncomingMessage,
  body: Buffer,
  extra: Record<string, string> = {},
): Promise<Response> {
  const headers = new Headers();
  for (const [name, value] of Object.entries(request.headers)) {
    if (typeof value === "string" && !["host", "connection", "content-length"].includes(name)) {
      headers.set(name, value);
    }
  }
  for (const [name, value] of Object.entries(extra)) headers.set(name, value);
  return fetch(upstream + (request.url ?? "/"), {
    method: request.method ?? "GET",
    headers,
    body: body.length > 0 ? body : null,
  });
}

async function relay(answer: Response, response: ServerResponse): Promise<void> {
  const payload = Buffer.from(await answer.arrayBuffer());
  const headers: Record<string, string> = {};
  answer.headers.forEach((value, name) => {
    if (!["content-length", "transfer-encoding", "connection", "content-encoding"].includes(name)) {
      headers[name] = value;
    }
  });
  response.writeHead(answer.status, { ...headers, "content-length": String(payload.length) });
  response.end(payload);
}

export async function startProxy(upstream: string): Promise<Proxy> {
  const plan: Step[] = [];
  const seen: Seen[] = [];
  const server: Server = createServer((request, response) => {
    const chunks: Buffer[] = [];
    request.on("data", (chunk: Buffer) => chunks.push(chunk));
    request.on("end", () => {
      const key = request.headers["idempotency-key"];
      seen.push({
        method: request.method ?? "",
        path: (request.url ?? "").split("?")[0] ?? "",
        idempotencyKey: typeof key === "string" ? key : undefined,
      });
      const step = plan.shift() ?? { forward: true };
      const body = Buffer.concat(chunks);
      void (async () => {
        if ("answer" in step) {
          const problem = {
            status: step.answer,
            title: "Planned",
            detail: `planned ${step.answer} from the test proxy`,
            ...step.problem,
          };
          const headers: Record<string, string> = { "content-type": "application/problem+json" };
          if (step.retryAfter !== undefined) headers["retry-after"] = step.retryAfter;
          response.writeHead(step.answer, headers);
          response.end(JSON.stringify(problem));
        } else if ("forwardThenDrop" in step) {
          await (await forward(upstream, request, body)).arrayBuffer(); // the API did the work
          request.socket.destroy(); // and its answer never arrives
        } else {
          await relay(await forward(upstream, request, body, step.headers), response);
        }
      })().catch((error: unknown) => {
        response.writeHead(502);
        response.end(String(error));
      });
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    plan,
    seen,
    close: () =>
      new Promise<void>((resolve, reject) => {
        server.closeAllConnections();
        server.close((error) => (error ? reject(error) : resolve()));
      }),
  };
}

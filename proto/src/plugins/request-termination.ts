/**
 * request_termination (Kong's `request-termination`): the gateway answers every request of the route itself and
 * never asks the upstream. `status_code` 200–599 (503 by default): a 1xx is an interim response, never an answer
 * on its own. Either `message`, sent as the gateway's own errors are (a JSON string, application/json), or `body`
 * with its `content_type`, sent as written; neither: the message "request terminated". A 204, 205 or 304 has no
 * content, so it takes neither. At most 64 KiB of body, as sent.
 */
import { z } from 'zod';
import { headerValueSchema } from './http-syntax.js';
import { deepFreeze, definePlugin } from './plugin.js';

export const MAX_TERMINATION_BODY_BYTES = 64 * 1024;
const DEFAULT_MESSAGE = 'request terminated';
/** Statuses whose answers have no content (RFC 9110 §15.3.5, §15.3.6, §15.4.5). */
const NO_CONTENT = new Set([204, 205, 304]);

const schema = z
  .object({
    status_code: z.int({ error: 'must be an integer HTTP status' }).min(200, 'must be at least 200').max(599, 'must be at most 599').default(503),
    message: z.string().optional(),
    body: z.string().optional(),
    content_type: headerValueSchema.min(1, 'must not be empty').max(256, 'is too long').optional(),
  })
  .superRefine((c, ctx) => {
    const issue = (path: string, message: string) => ctx.addIssue({ code: 'custom', path: [path], message });
    if (c.message !== undefined && c.body !== undefined) issue('body', 'must not be set together with message');
    else if (c.body !== undefined && c.content_type === undefined) issue('content_type', 'is required with body');
    else if (c.body === undefined && c.content_type !== undefined) issue('content_type', 'is allowed only with body');
    else if (NO_CONTENT.has(c.status_code) && (c.message ?? c.body) !== undefined)
      issue(c.body === undefined ? 'message' : 'body', `must not be set: a ${c.status_code} has no content`);
    else if (Buffer.byteLength(sentBody(c)) > MAX_TERMINATION_BODY_BYTES)
      issue(c.body === undefined ? 'message' : 'body', `is over ${MAX_TERMINATION_BODY_BYTES} bytes`);
  })
  // Stored with the default message filled, so what is shown is what is sent.
  .transform((c) => (c.body === undefined && c.message === undefined && !NO_CONTENT.has(c.status_code) ? { ...c, message: DEFAULT_MESSAGE } : c));

export type RequestTerminationConfig = z.output<typeof schema>;

function sentBody(c: { message?: string; body?: string }): string {
  if (c.body !== undefined) return c.body;
  return c.message === undefined ? '' : JSON.stringify(c.message);
}

export interface CompiledRequestTermination {
  status: number;
  /** null when the answer has no content. */
  contentType: string | null;
  body: string;
  /** The configured `message` as text (a gRPC client's grpc-message), null when the answer is a `body` or has none. */
  message: string | null;
}

export const requestTerminationPlugin = definePlugin({
  schema,
  compile: (c): CompiledRequestTermination =>
    deepFreeze({
      status: c.status_code,
      contentType: c.body !== undefined ? c.content_type! : c.message !== undefined ? 'application/json' : null,
      body: sentBody(c),
      message: c.message ?? null,
    }),
});

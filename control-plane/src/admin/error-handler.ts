/**
 * The one place admin errors become responses: everything thrown is turned into a
 * GatehouseError (library errors translated here, by their `type`), rendered as
 * `{"error": message}` with the status of its code; 5xx logged at error, 4xx at info.
 */
import type { ErrorRequestHandler, RequestHandler, Response } from 'express';
import { GatehouseError, adminBody, isGatehouseError, logLevelOf } from '#proto/errors';
import type { Logger } from '#proto/logger';

/** body-parser marks its errors with `type`; all are client errors. The router's decoding of a path parameter throws a URIError. */
export function toGatehouseError(err: unknown): GatehouseError {
  if (isGatehouseError(err)) return err;
  if (err instanceof URIError) return new GatehouseError('BAD_PATH_ENCODING', 'malformed percent-encoding in the request path', { cause: err });
  const type = (err as { type?: unknown } | null)?.type;
  if (type === 'entity.too.large') return new GatehouseError('BODY_TOO_LARGE', 'request body too large', { cause: err });
  if (typeof type === 'string') return new GatehouseError('BAD_JSON', 'malformed JSON body', { cause: err });
  return new GatehouseError('INTERNAL', 'internal server error', { cause: err });
}

/** The code of the error a response carries (set when it is sent), for spans. */
export function errorCodeOf(res: Response): string | undefined {
  return res.locals.errorCode as string | undefined;
}

function sendError(res: Response, err: GatehouseError): void {
  res.locals.errorCode = err.code;
  if (err.code === 'ADMIN_UNAUTHORIZED') res.set('WWW-Authenticate', 'Bearer');
  res.status(err.status).type('application/json').send(adminBody(err));
}

export const notFound: RequestHandler = () => {
  throw new GatehouseError('ROUTE_NOT_FOUND', 'not found');
};

export function methodNotAllowed(allowed: string[]): RequestHandler {
  return (_req, res) => {
    res.set('Allow', allowed.join(', '));
    throw new GatehouseError('METHOD_NOT_ALLOWED', 'method not allowed');
  };
}

export function createErrorHandler(logger: Logger): ErrorRequestHandler {
  return (thrown, req, res, _next) => {
    const err = toGatehouseError(thrown);
    const fields = { code: err.code, status: err.status, method: req.method, path: req.path };
    if (logLevelOf(err.code) === 'error') logger.error({ ...fields, err: err.cause ?? err }, err.message);
    else logger.info(fields, err.message);
    if (res.headersSent) {
      res.destroy();
      return;
    }
    sendError(res, err);
  };
}

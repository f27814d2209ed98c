import type { FastifyInstance, FastifyRequest } from 'fastify';
import { CanonicalJsonError, JsonContentError, parseJson } from '../lib/canonicalJson.js';

/** A body-parsing failure, as Fastify's own parser reports one (status 400, the framework code). */
export class JsonBodyError extends Error {
  readonly statusCode = 400;
  constructor(
    readonly code: 'FST_ERR_CTP_INVALID_JSON_BODY' | 'FST_ERR_CTP_EMPTY_JSON_BODY' | 'PIXGATE_ERR_JSON_CONTENT',
    message: string,
  ) {
    super(message);
    this.name = 'JsonBodyError';
  }
}

/**
 * The one JSON body parser of the APIs that parse bodies before their handlers (admin, sandbox,
 * boleto central; the external API parses in its signature stage with the same `parseJson`):
 * null-prototype objects (a `__proto__` or `constructor` key is data, refused by the schemas like
 * any unknown key), numbers that are not integer literals kept as JsonDecimal (so `100.0` is not
 * an integer), nesting limited. `allowEmpty`: an empty body is "no body" (undefined) instead of 400.
 */
export function useJsonBodyParser(app: FastifyInstance, options: { allowEmpty?: boolean } = {}) {
  if (app.hasContentTypeParser('application/json')) app.removeContentTypeParser('application/json');
  app.addContentTypeParser('application/json', { parseAs: 'string' }, (_req: FastifyRequest, body: string | Buffer, done) => {
    const text = body.toString();
    if (text.trim() === '') {
      if (options.allowEmpty) done(null, undefined);
      else done(new JsonBodyError('FST_ERR_CTP_EMPTY_JSON_BODY', 'Request body must not be empty'), undefined);
      return;
    }
    try {
      done(null, parseJson(text));
    } catch (err) {
      if (err instanceof JsonContentError) done(new JsonBodyError('PIXGATE_ERR_JSON_CONTENT', err.message), undefined);
      else if (err instanceof CanonicalJsonError) done(new JsonBodyError('FST_ERR_CTP_INVALID_JSON_BODY', 'Request body is not valid JSON'), undefined);
      else done(err as Error, undefined);
    }
  });
}

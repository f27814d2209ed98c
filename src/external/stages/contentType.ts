import { pipelineError, SHAPE1 } from '../../http/errors.js';
import { hasBody, header } from './request.js';
import type { Stage } from './stage.js';

const BODY_METHODS = new Set(['POST', 'PUT', 'PATCH']);
const ACCEPTED_MEDIA_TYPES = new Set(['application/json', 'multipart/form-data']);

/** Stage 1: a body is JSON (or multipart); anything else is 415, with a hint for curl -d. */
export const contentTypeStage: Stage = {
  n: 1,
  name: 'content-type',
  phase: 'onRequest',
  applies: (req) => BODY_METHODS.has(req.method) && hasBody(req),
  run(req) {
    const mediaType = (header(req, 'content-type') ?? '').split(';')[0]!.trim().toLowerCase();
    if (!ACCEPTED_MEDIA_TYPES.has(mediaType)) {
      throw pipelineError(415, SHAPE1.unsupportedMediaType, {
        hint:
          mediaType === 'application/x-www-form-urlencoded'
            ? 'curl -d sends application/x-www-form-urlencoded by default; add -H "Content-Type: application/json"'
            : 'Send the body as JSON with the header Content-Type: application/json',
      });
    }
  },
};

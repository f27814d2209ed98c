import { camelToSnake, convertKeys } from '../../lib/keyCase.js';
import { header } from './request.js';
import type { Stage } from './stage.js';

/** Stage 2: `X-Key-Case: camelCase` clients send and get camelCase keys (the query converted now). */
export const keyCaseStage: Stage = {
  n: 2,
  name: 'key-case',
  phase: 'onRequest',
  applies: () => true,
  run(req) {
    req.ext.camelCase = (header(req, 'x-key-case') ?? '').trim().toLowerCase() === 'camelcase';
    if (req.ext.camelCase && req.query && typeof req.query === 'object') {
      req.query = convertKeys(req.query, camelToSnake);
    }
  },
};

import { pipelineError, SHAPE1 } from '../../http/errors.js';
import { requestHash } from '../idempotency.js';
import { auth, header, idempotencyScopePath } from './request.js';
import type { Stage } from './stage.js';

/** Stage 8: a POST with an Idempotency-Key claims it, or replays the stored 2xx answer. */
export const idempotencyKeyStage: Stage = {
  n: 8,
  name: 'idempotency',
  phase: 'preHandler',
  applies: (req) => req.method === 'POST' && (header(req, 'idempotency-key') ?? '') !== '',
  async run(req, reply, { idempotency }) {
    const key = header(req, 'idempotency-key')!;
    if (key.length > 256) throw pipelineError(400, SHAPE1.idempotencyKeyTooLong);
    req.ext.idempotencyKey = key;
    const result = await idempotency.claim(
      { merchantId: auth(req).key.merchant_id, method: req.method, path: idempotencyScopePath(req), key },
      requestHash(req.ext.canonicalBody ?? ''),
    );
    switch (result.kind) {
      case 'claimed':
        req.ext.claim = result.claim;
        return;
      case 'replay':
        await reply
          .code(result.answer.statusCode)
          .header('content-type', 'application/json; charset=utf-8')
          .header('x-idempotent-replay', 'true')
          .send(result.answer.body);
        return 'answered';
      case 'mismatch':
        throw pipelineError(409, 'Idempotency-Key was already used with a different request body');
      case 'busy':
        throw pipelineError(409, 'A request with this Idempotency-Key is still being processed; retry later');
    }
  },
};

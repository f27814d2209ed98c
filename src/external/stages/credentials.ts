import { authenticate } from '../../auth/credentials.js';
import { credentialsRefused } from '../../http/errors.js';
import { header } from './request.js';
import type { Stage } from './stage.js';

/** Stage 3: the API key of the Authorization header (401 when it does not pass). */
export const credentialsStage: Stage = {
  n: 3,
  name: 'credentials',
  phase: 'onRequest',
  applies: () => true,
  async run(req, _reply, { ctx }) {
    const result = await authenticate((clientId) => ctx.credentials.apiKey(ctx.db, clientId), ctx.wallClock, header(req, 'authorization'));
    if (!('key' in result)) throw credentialsRefused(result.refused);
    req.ext.auth = result;
  },
};

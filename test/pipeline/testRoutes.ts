import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll } from 'vitest';
import type { AppContext } from '../../src/context.js';
import { principal, recordAnswer } from '../../src/external/pipeline.js';
import { merchantWithKey, type MerchantFixture } from '../helpers/client.js';
import { startTestServer, type TestServer, type TestServerOptions } from '../helpers/server.js';

/**
 * Routes mounted behind the real pipeline for its tests only:
 *  POST /test/echo     (account:read)    answers the body it received (after key-case conversion),
 *                                        also as a JSON string
 *  POST /test/execute  (transfer:write)  a writing operation: inserts one row and records its
 *                                        answer in the same transaction; ?fail=1 answers 422
 *  GET  /test/ping     (statement:read)  a plain GET
 */
export async function pipelineTestRoutes(app: FastifyInstance, ctx: AppContext) {
  await ctx.db.exec(`CREATE TABLE IF NOT EXISTS pipeline_test_executions (
    id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, client_id text NOT NULL, body jsonb NOT NULL)`);

  // `received_json` is a string value, so the answer's key case does not touch what it shows.
  app.post('/test/echo', { config: { permission: 'account:read' } }, async (req) => ({
    worked: true,
    received_body: req.body,
    received_json: JSON.stringify(req.body),
  }));

  app.get('/test/ping', { config: { permission: 'statement:read' } }, async (req) => ({ worked: true, query_json: JSON.stringify(req.query) }));

  app.post('/test/execute', { config: { permission: 'transfer:write' } }, async (req, reply) => {
    if ((req.query as Record<string, string>).fail === '1') {
      return reply.code(422).send({ errors: { unprocessable_entity: 'asked to fail' } });
    }
    const who = principal(req);
    const payload = await ctx.db.transaction(async (tx) => {
      // Slow enough that concurrent duplicates overlap with it.
      await tx.query('SELECT pg_sleep(0.05)');
      const [row] = await tx.query<{ id: number }>(
        'INSERT INTO pipeline_test_executions (client_id, body) VALUES ($1, $2::jsonb) RETURNING id',
        [who.clientId, JSON.stringify(req.body)],
      );
      const answer = { worked: true, execution_id: row!.id };
      await recordAnswer(req, tx, 201, answer);
      return answer;
    });
    return reply.code(201).send(payload);
  });
}

export async function executions(ctx: AppContext, clientId: string): Promise<number> {
  const [row] = await ctx.db.query<{ n: number }>('SELECT count(*)::bigint AS n FROM pipeline_test_executions WHERE client_id = $1', [clientId]);
  return row!.n;
}

/**
 * For a describe block: a server with these routes behind the real pipeline and a merchant holding
 * every permission, started before its tests and closed after them.
 */
export function withPipelineServer(options: TestServerOptions, ready: (server: TestServer, merchant: MerchantFixture) => void) {
  let server: TestServer | undefined;
  beforeAll(async () => {
    server = await startTestServer({ ...options, externalPlugins: [pipelineTestRoutes] });
    ready(server, await merchantWithKey(server));
  });
  afterAll(async () => server?.close());
}

import { createHmac } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PixClient, requestToken } from '../helpers/apiPix.js';
import { schemaViolations } from '../helpers/apiPixContract.js';
import { API_PIX_STANDARD_MISSING, apiPixStandard } from '../helpers/apiPixStandard.js';
import { addPixKey, merchantWithKey, type MerchantFixture } from '../helpers/client.js';
import { BACKENDS } from '../helpers/db.js';
import { balances, expectLedgerConsistent, sandbox, SIM_FAST, waitFor } from '../helpers/pix.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { startReceiver, type Receiver } from '../webhooks/helpers.js';

const standard = apiPixStandard();
/** The callback's body as the standard defines it (PUT /webhook/{chave}, callback `{webhookUrl}/pix`). */
const CALLBACK_BODY = '/components/requestBodies/WebhookPixBody/content/application~1json/schema';

/**
 * Issue 27's "Done when": a client that follows the standard works end to end against a local
 * pixgate — token → webhook → create, read and list a charge → payment through the sandbox →
 * CONCLUIDA with the Pix → list and read the Pix → return → DEVOLVIDO → the callbacks at
 * {webhookUrl}/pix received by a real HTTP server. Every answer of the façade is validated against
 * the standard's document by the contract check (test/helpers/apiPixContract.ts), the callbacks'
 * bodies against the callback's schema here.
 */
describe.skipIf(!standard).each(BACKENDS)(`API Pix end to end, as a client of the standard, on %s${standard ? '' : ` (skipped: ${API_PIX_STANDARD_MISSING})`}`, (backend) => {
  let s: TestServer;
  let r: Receiver;
  let m: MerchantFixture;
  let chave: string;
  beforeAll(async () => {
    r = await startReceiver();
    s = await startTestServer({ backend, env: { ...SIM_FAST, APP_ENV: 'local', WEBHOOK_ALLOWED_HOSTS: r.hostPort } });
    m = await merchantWithKey(s, { name: 'Padaria São João' });
    chave = await addPixKey(s, m.accountId, 'evp');
  });
  afterAll(async () => {
    if (s) await expectLedgerConsistent(s.ctx.db);
    await s?.close();
    await r?.close();
  });

  it('token → webhook → cob → paid in the sandbox → CONCLUIDA → /pix → devolucao DEVOLVIDO → {webhookUrl}/pix', async () => {
    // 1. The token, as an OAuth2 client does.
    const token = await requestToken(s.url, m.client.clientId, m.client.clientSecret, {
      grant_type: 'client_credentials',
      scope: 'cob.write cob.read pix.read pix.write webhook.write webhook.read',
    });
    expect(token.status).toBe(200);
    expect(token.body).toMatchObject({ token_type: 'Bearer', scope: 'cob.write cob.read pix.read pix.write webhook.write webhook.read' });
    const pix = new PixClient(s.url, token.body.access_token);

    // 2. The webhook of the key.
    const webhookUrl = `${r.url}/erp/pix-webhook`;
    expect((await pix.put(`/webhook/${encodeURIComponent(chave)}`, { webhookUrl })).status).toBe(200);
    expect((await pix.get(`/webhook/${encodeURIComponent(chave)}`)).body).toMatchObject({ webhookUrl, chave });

    // 3. Create, read and list the charge.
    const txid = `padariaSaoJoao${Date.now().toString(36)}pedido0042`.slice(0, 35);
    const created = await pix.put(`/cob/${txid}`, { calendario: { expiracao: 3600 }, valor: { original: '87.40' }, chave, solicitacaoPagador: 'Pedido 42' });
    expect(created.status).toBe(201);
    expect(created.body).toMatchObject({ txid, status: 'ATIVA', valor: { original: '87.40' }, chave });
    expect(typeof created.body.pixCopiaECola).toBe('string');
    expect((await pix.get(`/cob/${txid}`)).body.status).toBe('ATIVA');
    const window = `inicio=${new Date(Date.now() - 3_600_000).toISOString()}&fim=${new Date(Date.now() + 3_600_000).toISOString()}`;
    const cobs = await pix.get(`/cob?${window}`);
    expect(cobs.status).toBe(200);
    expect(cobs.body.cobs.map((c: { txid: string }) => c.txid)).toContain(txid);

    // 4. The payer pays the pixCopiaECola through the sandbox.
    const before = await balances(s.ctx.db, m.accountId);
    const paid = await sandbox(s, 'POST', '/pix/pay', { emv: created.body.pixCopiaECola, payer_name: 'Joana Cliente', payer_document: '52998224725', payer_ispb: '00360305' });
    expect(paid.status).toBe(201);
    const e2eid = paid.body.end_to_end_id as string;
    expect((await balances(s.ctx.db, m.accountId)).available).toBeGreaterThan(before.available);

    // 5. The charge is CONCLUIDA with its Pix.
    const concluded = await pix.get(`/cob/${txid}`);
    expect(concluded.body.status).toBe('CONCLUIDA');
    expect(concluded.body.pix).toEqual([expect.objectContaining({ endToEndId: e2eid, txid, valor: '87.40' })]);

    // 6. List and read the Pix.
    const listed = await pix.get(`/pix?${window}&txid=${txid}`);
    expect(listed.status).toBe(200);
    expect(listed.body.pix).toEqual([{ endToEndId: e2eid, txid, valor: '87.40', chave, horario: expect.any(String) }]);
    const one = await pix.get(`/pix/${e2eid}`);
    expect(one.body).toEqual(listed.body.pix[0]);

    // 7. The callback of the payment at {webhookUrl}/pix.
    const callbacks = () => r.received.filter((x) => x.path === '/erp/pix-webhook/pix');
    const carries = (pred: (p: any) => boolean) => callbacks().some((x) => Array.isArray(x.body?.pix) && x.body.pix.some(pred));
    await r.waitFor(() => carries((p) => p.endToEndId === e2eid));

    // 8. A partial return, DEVOLVIDO through the rail.
    const devolucao = await pix.put(`/pix/${e2eid}/devolucao/DEV42`, { valor: '7.40', natureza: 'ORIGINAL', descricao: 'Item em falta' });
    expect(devolucao.status).toBe(201);
    expect(devolucao.body).toMatchObject({ id: 'DEV42', valor: '7.40', natureza: 'ORIGINAL', status: expect.stringMatching(/^(EM_PROCESSAMENTO|DEVOLVIDO)$/) });
    const done = await waitFor(() => pix.get(`/pix/${e2eid}/devolucao/DEV42`), (res) => res.body?.status === 'DEVOLVIDO');
    expect(done.body).toMatchObject({ id: 'DEV42', rtrId: devolucao.body.rtrId, status: 'DEVOLVIDO', horario: { liquidacao: expect.any(String) } });
    expect((await pix.get(`/pix/${e2eid}`)).body.devolucoes).toEqual([done.body]);

    // 9. The callback of the return's final state.
    await r.waitFor(() => carries((p) => p.endToEndId === e2eid && p.devolucoes?.some((d: any) => d.id === 'DEV42' && d.status === 'DEVOLVIDO')));

    // Every callback is the standard's body, signed by pixgate's delivery engine.
    const [hook] = await s.ctx.db.query<{ secret: string }>('SELECT w.secret FROM webhooks w JOIN api_pix_webhooks a ON a.webhook_id = w.id WHERE a.chave = $1', [chave]);
    for (const x of callbacks()) {
      expect(schemaViolations(CALLBACK_BODY, x.body)).toEqual([]);
      expect(Object.keys(x.body)).toEqual(['pix']);
      expect(x.headers['content-type']).toBe('application/json');
      expect(x.headers['x-service-signature']).toBe(createHmac('sha256', hook!.secret).update(x.raw).digest('hex'));
      for (const p of x.body.pix) expect(p).toMatchObject({ endToEndId: e2eid, txid, valor: '87.40', chave });
    }
  });
});

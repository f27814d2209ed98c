import { createHmac } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { getReceivedPix, listReceivedPix, parsePixQuery } from '../../src/apiPix/pixReceived.js';
import { getReturn, parseReturnRequest, requestReturn } from '../../src/apiPix/pixReturns.js';
import { deletePixWebhook, getPixWebhook, listPixWebhooks, putPixWebhook } from '../../src/apiPix/pixWebhooks.js';
import { centsOfValor, valorOf } from '../../src/apiPix/pixViews.js';
import { DomainError } from '../../src/errors/catalog.js';
import { BACKENDS } from '../helpers/db.js';
import { addPixKey, merchantWithKey, type MerchantFixture } from '../helpers/client.js';
import { balances, expectLedgerConsistent, sandbox, SIM_FAST, waitFor } from '../helpers/pix.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { insertTestWebhook, startReceiver, type Receiver } from '../webhooks/helpers.js';

const DAY_MS = 86_400_000;

/** The standard's type and violations a domain refusal carries. */
async function refusal(p: Promise<unknown>): Promise<{ code: string; type: string; violacoes: Array<{ razao: string; propriedade?: string }> }> {
  try {
    await p;
  } catch (err) {
    if (!(err instanceof DomainError)) throw err;
    return { code: err.code, type: String(err.extra?.apiPixType), violacoes: (err.extra?.violacoes as never) ?? [] };
  }
  throw new Error('expected a refusal');
}

describe('API Pix amounts', () => {
  it('base units and the standard decimal strings, exactly', () => {
    expect(valorOf(1_234_500)).toBe('123.45');
    expect(valorOf(100)).toBe('0.01');
    expect(valorOf(999_999_999_999_00)).toBe('9999999999.99');
    expect(centsOfValor('0.01')).toBe(1);
    expect(centsOfValor('9999999999.99')).toBe(999_999_999_999);
    for (const bad of ['1', '1.2', '1.234', '-1.00', '12345678901.00', ' 1.00', 1.5, null]) expect(centsOfValor(bad)).toBeNull();
  });
});

describe.each(BACKENDS)('API Pix received Pix, returns and webhooks (domain) on %s', (backend) => {
  let s: TestServer;
  let r: Receiver;
  let m: MerchantFixture;
  let key: string;
  let shift = 0;
  beforeAll(async () => {
    r = await startReceiver();
    s = await startTestServer({
      backend,
      env: { ...SIM_FAST, WEBHOOK_ALLOWED_HOSTS: r.hostPort, WEBHOOK_RETRY_SCHEDULE: '1s,1s,1s' },
      clock: { now: () => new Date(Date.now() + shift) },
    });
    m = await merchantWithKey(s, { depositCents: 100_000 });
    key = await addPixKey(s, m.accountId, 'evp');
  });
  afterAll(async () => {
    if (s) await expectLedgerConsistent(s.ctx.db);
    await s?.close();
    await r?.close();
  });
  const scope = () => ({ merchantId: m.merchantId, accountId: m.accountId });

  /** A charge of `cents` on the merchant's key, paid through the sandbox by a payer with `document`. */
  const paidCharge = async (cents: number, document = '52998224725') => {
    const c = await m.client.post('/pix/cash-in', { amount: cents, pix_key: key });
    expect(c.status).toBe(201);
    const paid = await sandbox(s, 'POST', '/pix/pay', { emv: c.body.emv, payer_name: 'Rita Pagadora', payer_document: document, payer_ispb: '00360305' });
    expect(paid.status).toBe(201);
    return { txid: c.body.txid as string, e2e: paid.body.end_to_end_id as string };
  };
  const plainInbound = async (cents: number) => {
    const res = await sandbox(s, 'POST', '/pix/inbound', { account_id: m.accountId, amount: cents, payer_name: 'Carlos Pagador', payer_document: '52998224725', payer_ispb: '60746948', description: 'Reforma da casa' });
    expect(res.status).toBe(201);
    return res.body.end_to_end_id as string;
  };
  const window = (extra: Record<string, string> = {}) =>
    parsePixQuery({ inicio: new Date(Date.now() + shift - 3_600_000).toISOString(), fim: new Date(Date.now() + shift + 3_600_000).toISOString(), ...extra });

  it('GET /pix/{e2eid}: a paid charge reads with its txid, key and valor; a plain PIX with infoPagador; another scope finds nothing', async () => {
    const charge = await paidCharge(1234);
    const pix = await getReceivedPix(s.ctx.db, scope(), charge.e2e);
    expect(pix).toEqual({ endToEndId: charge.e2e, txid: charge.txid, valor: '12.34', chave: key, horario: expect.stringMatching(/Z$/) });
    const plain = await plainInbound(500);
    expect(await getReceivedPix(s.ctx.db, scope(), plain)).toEqual({ endToEndId: plain, valor: '5.00', horario: expect.any(String), infoPagador: 'Reforma da casa' });

    const other = await merchantWithKey(s);
    expect(await refusal(getReceivedPix(s.ctx.db, { merchantId: other.merchantId, accountId: other.accountId }, charge.e2e))).toMatchObject({ code: 'not_found', type: 'PixNaoEncontrado' });
    expect(await refusal(getReceivedPix(s.ctx.db, scope(), 'E123'))).toMatchObject({ code: 'not_found', type: 'PixNaoEncontrado' });
  });

  it('GET /pix: the window, txid, txIdPresente, devolucaoPresente, cpf/cnpj filters and the pages', async () => {
    const a = await paidCharge(100, '11144477735');
    const b = await paidCharge(200, '11144477735');
    const plain = await plainInbound(300);
    await requestReturn(s.ctx, scope(), b.e2e, 'r1', parseReturnRequest({ valor: '1.00' }));

    const all = await listReceivedPix(s.ctx.db, scope(), window());
    const ids = all.pix.map((p) => p.endToEndId);
    expect(ids).toEqual(expect.arrayContaining([a.e2e, b.e2e, plain]));
    expect(all.parametros.paginacao).toMatchObject({ paginaAtual: 0, itensPorPagina: 100, quantidadeTotalDeItens: all.pix.length });

    expect((await listReceivedPix(s.ctx.db, scope(), window({ txid: a.txid }))).pix.map((p) => p.endToEndId)).toEqual([a.e2e]);
    const withTxid = (await listReceivedPix(s.ctx.db, scope(), window({ txIdPresente: 'true' }))).pix;
    expect(withTxid.every((p) => p.txid !== undefined)).toBe(true);
    expect(withTxid.map((p) => p.endToEndId)).not.toContain(plain);
    expect((await listReceivedPix(s.ctx.db, scope(), window({ txIdPresente: 'false' }))).pix.map((p) => p.endToEndId)).toContain(plain);
    const returned = (await listReceivedPix(s.ctx.db, scope(), window({ devolucaoPresente: 'true' }))).pix;
    expect(returned.map((p) => p.endToEndId)).toContain(b.e2e);
    expect(returned.map((p) => p.endToEndId)).not.toContain(a.e2e);
    expect(returned.find((p) => p.endToEndId === b.e2e)!.devolucoes).toEqual([expect.objectContaining({ id: 'r1', valor: '1.00', natureza: 'ORIGINAL' })]);
    const byCpf = (await listReceivedPix(s.ctx.db, scope(), window({ cpf: '11144477735' }))).pix.map((p) => p.endToEndId);
    expect(byCpf.sort()).toEqual([a.e2e, b.e2e].sort());

    const page1 = await listReceivedPix(s.ctx.db, scope(), window({ 'paginacao.itensPorPagina': '2', 'paginacao.paginaAtual': '1' }));
    expect(page1.pix.map((p) => p.endToEndId)).toEqual(ids.slice(2, 4));
    expect(page1.parametros.paginacao).toEqual({ paginaAtual: 1, itensPorPagina: 2, quantidadeDePaginas: Math.ceil(ids.length / 2), quantidadeTotalDeItens: ids.length });
    const past = await listReceivedPix(s.ctx.db, scope(), window({ 'paginacao.itensPorPagina': '2', 'paginacao.paginaAtual': '999' }));
    expect(past.pix).toEqual([]);
    expect(past.parametros.paginacao.quantidadeTotalDeItens).toBe(ids.length);

    const early = parsePixQuery({ inicio: '2020-01-01T00:00:00Z', fim: '2020-01-02T00:00:00Z' });
    expect((await listReceivedPix(s.ctx.db, scope(), early)).pix).toEqual([]);
  });

  it('GET /pix: refuses a query outside the standard with PixConsultaInvalida and one violation per problem', () => {
    const violations = (q: Record<string, unknown>) => {
      try {
        parsePixQuery(q);
      } catch (err) {
        expect((err as DomainError).extra?.apiPixType).toBe('PixConsultaInvalida');
        return ((err as DomainError).extra?.violacoes as Array<{ propriedade: string }>).map((v) => v.propriedade);
      }
      throw new Error('accepted');
    };
    expect(violations({})).toEqual(['inicio', 'fim']);
    expect(violations({ inicio: '2026-01-02T00:00:00Z', fim: '2026-01-01T00:00:00Z' })).toEqual(['fim']);
    expect(violations({ inicio: 'ontem', fim: '2026-01-01T00:00:00Z' })).toEqual(['inicio']);
    const ok = { inicio: '2026-01-01T00:00:00Z', fim: '2026-01-02T00:00:00Z' };
    expect(violations({ ...ok, cpf: '11144477735', cnpj: '11222333000181' })).toEqual(['cpf']);
    expect(violations({ ...ok, 'paginacao.paginaAtual': '-1' })).toEqual(['paginacao.paginaAtual']);
    expect(violations({ ...ok, 'paginacao.itensPorPagina': '0' })).toEqual(['paginacao.itensPorPagina']);
    expect(violations({ ...ok, 'paginacao.itensPorPagina': '1001' })).toEqual(['paginacao.itensPorPagina']);
    expect(violations({ ...ok, txid: 'a-b' })).toEqual(['txid']);
    expect(violations({ ...ok, txIdPresente: 'yes' })).toEqual(['txIdPresente']);
    expect(parsePixQuery({ ...ok, cnpj: '12ABC34501DE35' }).document).toBe('12ABC34501DE35');
  });

  it('PUT devolucao: EM_PROCESSAMENTO with rtrId, then DEVOLVIDO through the rail, with the ledger moved once; GET reads it', async () => {
    const charge = await paidCharge(5000);
    const before = await balances(s.ctx.db, m.accountId);
    const put = await requestReturn(s.ctx, scope(), charge.e2e, 'dev1', parseReturnRequest({ valor: '20.00', descricao: 'Troca do produto' }));
    expect(put.statusCode).toBe(201);
    expect(put.body).toMatchObject({ id: 'dev1', rtrId: expect.stringMatching(/^D[0-9]{8}[0-9]{12}[A-Za-z0-9]{11}$/), valor: '20.00', natureza: 'ORIGINAL', descricao: 'Troca do produto' });
    expect(put.body.rtrId).toHaveLength(32);
    expect(['EM_PROCESSAMENTO', 'DEVOLVIDO']).toContain(put.body.status);
    expect((await balances(s.ctx.db, m.accountId)).available).toBe(before.available - 200_000);
    const done = await waitFor(() => getReturn(s.ctx, scope(), charge.e2e, 'dev1'), (d) => d.status === 'DEVOLVIDO');
    expect(done.horario.liquidacao).toMatch(/Z$/);
    expect(done.rtrId).toBe(put.body.rtrId);
    expect((await getReceivedPix(s.ctx.db, scope(), charge.e2e)).devolucoes).toEqual([done]);
    expect(await refusal(getReturn(s.ctx, scope(), charge.e2e, 'nope'))).toMatchObject({ code: 'not_found', type: 'PixDevolucaoNaoEncontrada' });
  });

  it('PUT devolucao is idempotent on its id: the same request answers the same return, another request is refused', async () => {
    const charge = await paidCharge(3000);
    const first = await requestReturn(s.ctx, scope(), charge.e2e, 'idem1', parseReturnRequest({ valor: '10.00' }));
    const again = await requestReturn(s.ctx, scope(), charge.e2e, 'idem1', parseReturnRequest({ valor: '10.00' }));
    expect(again.body.rtrId).toBe(first.body.rtrId);
    const count = await s.ctx.db.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM transactions t JOIN transactions o ON o.id = t.original_id WHERE o.end_to_end_id = $1 AND t.kind = 'refund'`,
      [charge.e2e],
    );
    expect(count[0]!.n).toBe(1);
    const other = await refusal(requestReturn(s.ctx, scope(), charge.e2e, 'idem1', parseReturnRequest({ valor: '11.00' })));
    expect(other).toMatchObject({ code: 'bad_request', type: 'PixDevolucaoInvalida' });
    expect(other.violacoes[0]!.propriedade).toBe('id');
  });

  it('the sum of returns never exceeds the Pix, also when two returns race: one of them is refused', async () => {
    const charge = await paidCharge(1000);
    const over = await refusal(requestReturn(s.ctx, scope(), charge.e2e, 'over', parseReturnRequest({ valor: '10.01' })));
    expect(over).toMatchObject({ type: 'PixDevolucaoInvalida', violacoes: [{ propriedade: 'devolucao.valor' }] });
    const results = await Promise.allSettled([
      requestReturn(s.ctx, scope(), charge.e2e, 'raceA', parseReturnRequest({ valor: '6.00' })),
      requestReturn(s.ctx, scope(), charge.e2e, 'raceB', parseReturnRequest({ valor: '6.00' })),
    ]);
    expect(results.filter((x) => x.status === 'fulfilled')).toHaveLength(1);
    const refused = results.find((x) => x.status === 'rejected') as PromiseRejectedResult;
    expect((refused.reason as DomainError).extra?.apiPixType).toBe('PixDevolucaoInvalida');
    // The rest fits exactly.
    expect((await requestReturn(s.ctx, scope(), charge.e2e, 'rest', parseReturnRequest({ valor: '4.00' }))).statusCode).toBe(201);
  });

  it('two concurrent PUTs of the same id and body make one return and answer it twice', async () => {
    const charge = await paidCharge(1000);
    const [a, b] = await Promise.all([
      requestReturn(s.ctx, scope(), charge.e2e, 'twin', parseReturnRequest({ valor: '7.00' })),
      requestReturn(s.ctx, scope(), charge.e2e, 'twin', parseReturnRequest({ valor: '7.00' })),
    ]);
    expect(a.body.rtrId).toBe(b.body.rtrId);
  });

  it('refuses RETIRADA (no Pix Saque or Troco here), a bad valor, and a return after 90 days', async () => {
    const charge = await paidCharge(1000);
    expect(await refusal(requestReturn(s.ctx, scope(), charge.e2e, 'w1', parseReturnRequest({ valor: '1.00', natureza: 'RETIRADA' })))).toMatchObject({
      type: 'PixDevolucaoInvalida',
      violacoes: [{ propriedade: 'devolucao.natureza' }],
    });
    expect(await refusal(Promise.resolve().then(() => parseReturnRequest({ valor: '1' })))).toMatchObject({ type: 'PixDevolucaoInvalida', violacoes: [{ propriedade: 'devolucao.valor' }] });
    expect(await refusal(Promise.resolve().then(() => parseReturnRequest({ valor: '1.00', natureza: 'MED_FRAUDE' })))).toMatchObject({ violacoes: [{ propriedade: 'devolucao.natureza' }] });
    expect(await refusal(requestReturn(s.ctx, scope(), charge.e2e, 'bad-id', parseReturnRequest({ valor: '1.00' })))).toMatchObject({ violacoes: [{ propriedade: 'id' }] });
    expect(await refusal(requestReturn(s.ctx, scope(), 'E00000000202601010000aaaaaaaaaaa', 'x1', parseReturnRequest({ valor: '1.00' })))).toMatchObject({ code: 'not_found' });
    shift = 91 * DAY_MS;
    try {
      const late = await refusal(requestReturn(s.ctx, scope(), charge.e2e, 'late', parseReturnRequest({ valor: '1.00' })));
      expect(late).toMatchObject({ type: 'PixDevolucaoInvalida', violacoes: [{ razao: expect.stringContaining('90 dias') }] });
    } finally {
      shift = 0;
    }
  });

  it('webhooks: PUT/GET/DELETE on a key of the receiver only; http only on WEBHOOK_ALLOWED_HOSTS in local mode', async () => {
    const owner = { ...scope(), clientId: null };
    expect(await refusal(putPixWebhook(s.ctx, owner, 'not-a-key@example.com', { webhookUrl: r.url }))).toMatchObject({ type: 'WebhookOperacaoInvalida', violacoes: [{ propriedade: 'chave' }] });
    expect(await refusal(putPixWebhook(s.ctx, owner, key, { webhookUrl: 'http://example.com/hook' }))).toMatchObject({ violacoes: [{ propriedade: 'webhook.webhookUrl' }] });
    expect(await refusal(putPixWebhook(s.ctx, owner, key, { webhookUrl: 'https://10.0.0.1/hook' }))).toMatchObject({ violacoes: [{ propriedade: 'webhook.webhookUrl' }] });
    expect(await refusal(putPixWebhook(s.ctx, owner, key, {}))).toMatchObject({ type: 'WebhookOperacaoInvalida' });
    const other = await merchantWithKey(s);
    const otherKey = await addPixKey(s, other.accountId, 'evp');
    expect(await refusal(putPixWebhook(s.ctx, owner, otherKey, { webhookUrl: r.url }))).toMatchObject({ violacoes: [{ propriedade: 'chave' }] });

    const put = await putPixWebhook(s.ctx, owner, key, { webhookUrl: `${r.url}/first/` });
    expect(put).toEqual({ webhookUrl: `${r.url}/first/`, chave: key, criacao: expect.stringMatching(/Z$/) });
    const replaced = await putPixWebhook(s.ctx, owner, key, { webhookUrl: `${r.url}/hook` });
    expect(replaced).toEqual({ webhookUrl: `${r.url}/hook`, chave: key, criacao: put.criacao });
    expect(await getPixWebhook(s.ctx, scope(), key)).toEqual(replaced);
    const list = await listPixWebhooks(s.ctx, scope(), { page: 0, perPage: 100 });
    expect(list.webhooks).toEqual([replaced]);
    const engineRows = await s.ctx.db.query<{ url: string; deleted_at: Date | null }>('SELECT url, deleted_at FROM webhooks WHERE merchant_id = $1', [m.merchantId]);
    expect(engineRows).toEqual([{ url: `${r.url}/hook/pix`, deleted_at: null }]);

    await deletePixWebhook(s.ctx, scope(), key);
    expect(await refusal(getPixWebhook(s.ctx, scope(), key))).toMatchObject({ code: 'not_found', type: 'WebhookNaoEncontrado' });
    expect(await refusal(deletePixWebhook(s.ctx, scope(), key))).toMatchObject({ code: 'not_found', type: 'WebhookNaoEncontrado' });
    expect((await listPixWebhooks(s.ctx, scope(), { page: 0, perPage: 100 })).webhooks).toEqual([]);
  });

  it('webhooks: paid charges and final returns reach {webhookUrl}/pix as {"pix": [...]}, signed by the engine; plain PIX do not', async () => {
    await putPixWebhook(s.ctx, { ...scope(), clientId: null }, key, { webhookUrl: `${r.url}/cb` });
    const secret = (await s.ctx.db.query<{ secret: string }>('SELECT secret FROM webhooks WHERE merchant_id = $1 AND deleted_at IS NULL', [m.merchantId]))[0]!.secret;
    const start = r.received.length;
    const mine = () => r.received.slice(start);
    const seen = (e2e: string, pred: (p: any) => boolean = () => true) => mine().some((x) => (x.body.pix as any[]).some((p) => p.endToEndId === e2e && pred(p)));

    const plain = await plainInbound(700);
    const one = await paidCharge(4321);
    const two = await paidCharge(1111);
    await r.waitFor(() => seen(one.e2e) && seen(two.e2e));
    for (const x of mine()) {
      expect(x.path).toBe('/cb/pix');
      expect(Object.keys(x.body)).toEqual(['pix']);
      expect(x.headers['x-service-signature']).toBe(createHmac('sha256', secret).update(x.raw).digest('hex'));
    }
    expect(seen(plain)).toBe(false);
    const first = mine().flatMap((x) => x.body.pix).find((p: any) => p.endToEndId === one.e2e);
    expect(first).toEqual({ endToEndId: one.e2e, txid: one.txid, valor: '43.21', chave: key, horario: expect.any(String) });

    await requestReturn(s.ctx, scope(), one.e2e, 'wh1', parseReturnRequest({ valor: '1.21' }));
    await r.waitFor(() => seen(one.e2e, (p) => p.devolucoes?.[0]?.status === 'DEVOLVIDO'));
    const withReturn = mine().flatMap((x) => x.body.pix).find((p: any) => p.devolucoes?.[0]?.status === 'DEVOLVIDO');
    expect(withReturn.devolucoes[0]).toMatchObject({ id: 'wh1', valor: '1.21', status: 'DEVOLVIDO' });
    await deletePixWebhook(s.ctx, scope(), key);
  });

  it('webhooks: a key whose engine registration was deleted through DELETE /webhooks/{id} gets no notices, and GET /webhook/{chave} is 404', async () => {
    const { deleteWebhook } = await import('../../src/webhooks/service.js');
    await putPixWebhook(s.ctx, { ...scope(), clientId: null }, key, { webhookUrl: `${r.url}/gone` });
    const [row] = await s.ctx.db.query<{ webhook_id: string }>('SELECT webhook_id FROM api_pix_webhooks WHERE account_id = $1', [m.accountId]);
    expect(await deleteWebhook(s.ctx, { merchantId: m.merchantId, accountId: null }, row!.webhook_id)).toBe(true);
    await paidCharge(333);
    const notices = await s.ctx.db.query('SELECT 1 FROM api_pix_webhook_notices n JOIN api_pix_webhooks w ON w.id = n.subscription_id WHERE w.account_id = $1', [m.accountId]);
    expect(notices).toEqual([]);
    expect(await refusal(getPixWebhook(s.ctx, scope(), key))).toMatchObject({ type: 'WebhookNaoEncontrado' });
    // Set again: a new registration replaces the dead one.
    expect((await putPixWebhook(s.ctx, { ...scope(), clientId: null }, key, { webhookUrl: `${r.url}/again` })).webhookUrl).toBe(`${r.url}/again`);
    await deletePixWebhook(s.ctx, scope(), key);
  });

  it('a return the rail rejects is NAO_REALIZADO with its motivo, and reaches the webhook (a merchant-API refund is named by its transaction_id)', async () => {
    await putPixWebhook(s.ctx, { ...scope(), clientId: null }, key, { webhookUrl: `${r.url}/rejected` });
    const charge = await paidCharge(900);
    const res = await m.client.post('/pix/refund', { original_e2e_id: charge.e2e, amount: 100, reason: 'ZZ99' });
    expect(res.status).toBe(202);
    const failed = await waitFor(() => getReturn(s.ctx, scope(), charge.e2e, res.body.transaction_id), (d) => d.status !== 'EM_PROCESSAMENTO');
    expect(failed).toEqual({
      id: res.body.transaction_id,
      rtrId: res.body.end_to_end_id,
      valor: '1.00',
      descricao: 'Devolução PIX',
      horario: { solicitacao: expect.any(String) },
      status: 'NAO_REALIZADO',
      motivo: expect.stringContaining('Return code'),
    });
    await r.waitFor((all) => all.some((x) => x.path === '/rejected/pix' && x.body.pix.some((p: any) => p.devolucoes?.[0]?.status === 'NAO_REALIZADO')));
    await deletePixWebhook(s.ctx, scope(), key);
  });

  it('webhooks: each is a registration of the engine, within the merchant\'s bound of 25', async () => {
    const { MAX_WEBHOOKS_PER_MERCHANT } = await import('../../src/webhooks/registration.js');
    const full = await merchantWithKey(s);
    const fullKey = await addPixKey(s, full.accountId, 'evp');
    for (let i = 0; i < MAX_WEBHOOKS_PER_MERCHANT; i++) await insertTestWebhook(s.ctx.db, { merchantId: full.merchantId, accountId: full.accountId, url: `${r.url}/n${i}` });
    const refused = await refusal(putPixWebhook(s.ctx, { merchantId: full.merchantId, accountId: full.accountId, clientId: null }, fullKey, { webhookUrl: r.url }));
    expect(refused).toMatchObject({ type: 'WebhookOperacaoInvalida', violacoes: [{ razao: expect.stringContaining('25') }] });
  });

  it('webhooks: several due Pix of a key go in one POST, at most the batch bound each', async () => {
    const { batchPixNotices, BATCH } = await import('../../src/apiPix/pixWebhookBatches.js');
    const { noticeForKey } = await import('../../src/apiPix/pixNotices.js');
    const hook = await putPixWebhook(s.ctx, { ...scope(), clientId: null }, key, { webhookUrl: `${r.url}/batch` });
    expect(hook.chave).toBe(key);
    const paid: Array<{ txid: string; e2e: string }> = [];
    for (let i = 0; i < 3; i++) paid.push(await paidCharge(100 + i));
    await r.waitFor(() => paid.every((p) => r.received.some((x) => x.path === '/batch/pix' && x.body.pix.some((q: any) => q.endToEndId === p.e2e))));
    // Notices written together (as when many Pix land while the dispatcher is busy) go out together.
    const before = r.received.filter((x) => x.path === '/batch/pix').length;
    await s.ctx.db.transaction(async (tx) => {
      for (let i = 0; i < BATCH.pix + 5; i++) await noticeForKey(tx, { accountId: m.accountId, chave: key, endToEndId: paid[i % 3]!.e2e });
    });
    await batchPixNotices(s.ctx.db);
    await r.waitFor(() => r.received.filter((x) => x.path === '/batch/pix').length > before);
    const batch = r.received.filter((x) => x.path === '/batch/pix').slice(before);
    expect(batch[0]!.body.pix.map((p: any) => p.endToEndId).sort()).toEqual(paid.map((p) => p.e2e).sort());
    await deletePixWebhook(s.ctx, scope(), key);
  });
});

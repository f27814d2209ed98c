import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { apiPixStandard } from '../helpers/apiPixStandard.js';
import { pixClientFor, type PixClient } from '../helpers/apiPix.js';
import { addPixKey, merchantWithKey, type MerchantFixture } from '../helpers/client.js';
import { BACKENDS } from '../helpers/db.js';
import { expectLedgerConsistent, sandbox, SIM_FAST, waitFor } from '../helpers/pix.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { startReceiver, type Receiver } from '../webhooks/helpers.js';

const TYPE = 'https://pix.bcb.gov.br/api/v2/error/';

/**
 * /api/pix/v2/pix, /pix/{e2eid}/devolucao/{id} and /webhook over HTTP with a bearer token; every
 * exchange is checked against the standard's document by the contract check (test/helpers/apiPixContract.ts).
 */
describe.each(BACKENDS)('API Pix /pix, devolucao and /webhook routes on %s', (backend) => {
  let s: TestServer;
  let r: Receiver;
  let m: MerchantFixture;
  let pix: PixClient;
  let key: string;
  beforeAll(async () => {
    r = await startReceiver();
    s = await startTestServer({ backend, env: { ...SIM_FAST, WEBHOOK_ALLOWED_HOSTS: r.hostPort } });
    m = await merchantWithKey(s, { depositCents: 100_000 });
    key = await addPixKey(s, m.accountId, 'evp');
    pix = await pixClientFor(s.url, m);
  });
  afterAll(async () => {
    if (s) await expectLedgerConsistent(s.ctx.db);
    await s?.close();
    await r?.close();
  });

  const paidCharge = async (cents: number) => {
    const c = await m.client.post('/pix/cash-in', { amount: cents, pix_key: key });
    expect(c.status).toBe(201);
    const paid = await sandbox(s, 'POST', '/pix/pay', { emv: c.body.emv, payer_name: 'Rita Pagadora', payer_document: '52998224725', payer_ispb: '00360305' });
    expect(paid.status).toBe(201);
    return { txid: c.body.txid as string, e2e: paid.body.end_to_end_id as string };
  };
  const window = () => {
    const now = Date.now();
    return `inicio=${new Date(now - 3_600_000).toISOString()}&fim=${new Date(now + 3_600_000).toISOString()}`;
  };

  it('the standard document is there (these tests validate every answer against it)', () => {
    expect(apiPixStandard()?.version).toBe('2.9.0');
  });

  it('GET /pix lists received Pix with the filters; GET /pix/{e2eid} reads one; problems for bad queries and unknown Pix', async () => {
    const paid = await paidCharge(2550);
    const list = await pix.get(`/pix?${window()}&txid=${paid.txid}`);
    expect(list.status).toBe(200);
    expect(list.body.pix).toEqual([{ endToEndId: paid.e2e, txid: paid.txid, valor: '25.50', chave: key, horario: expect.any(String) }]);
    expect(list.body.parametros).toMatchObject({ txid: paid.txid, paginacao: { paginaAtual: 0, itensPorPagina: 100, quantidadeDePaginas: 1, quantidadeTotalDeItens: 1 } });

    const one = await pix.get(`/pix/${paid.e2e}`);
    expect(one.status).toBe(200);
    expect(one.body).toEqual(list.body.pix[0]);

    const bad = await pix.get('/pix?inicio=2026-01-02T00:00:00Z&fim=2026-01-01T00:00:00Z&cpf=1');
    expect(bad.status).toBe(400);
    expect(bad.headers.get('content-type')).toMatch(/^application\/problem\+json/);
    expect(bad.body).toMatchObject({ type: `${TYPE}PixConsultaInvalida`, status: 400 });
    expect(bad.body.violacoes.map((v: { propriedade: string }) => v.propriedade)).toEqual(['fim', 'cpf']);

    const missing = await pix.get('/pix/E00000000202601010000aaaaaaaaaaa');
    expect(missing.status).toBe(404);
    expect(missing.body).toMatchObject({ type: `${TYPE}PixNaoEncontrado`, status: 404 });
  });

  it('PUT devolucao: 201 EM_PROCESSAMENTO, the same request again answers the same return, another body 400; GET sees DEVOLVIDO', async () => {
    const paid = await paidCharge(4000);
    const put = await pix.put(`/pix/${paid.e2e}/devolucao/D1`, { valor: '15.00', descricao: 'Devolução parcial' });
    expect(put.status).toBe(201);
    expect(put.body).toMatchObject({ id: 'D1', valor: '15.00', natureza: 'ORIGINAL', descricao: 'Devolução parcial', horario: { solicitacao: expect.any(String) } });
    expect(put.body.rtrId).toHaveLength(32);
    const again = await pix.put(`/pix/${paid.e2e}/devolucao/D1`, { valor: '15.00', descricao: 'Devolução parcial' });
    expect(again.status).toBe(201);
    expect(again.body.rtrId).toBe(put.body.rtrId);
    const other = await pix.put(`/pix/${paid.e2e}/devolucao/D1`, { valor: '16.00' });
    expect(other.status).toBe(400);
    expect(other.body).toMatchObject({ type: `${TYPE}PixDevolucaoInvalida`, violacoes: [{ propriedade: 'id', valor: 'D1' }] });
    const over = await pix.put(`/pix/${paid.e2e}/devolucao/D2`, { valor: '25.01' });
    expect(over.status).toBe(400);
    expect(over.body).toMatchObject({ type: `${TYPE}PixDevolucaoInvalida`, violacoes: [{ propriedade: 'devolucao.valor' }] });
    const malformed = await pix.put(`/pix/${paid.e2e}/devolucao/D3`, { valor: 10 });
    expect(malformed.status).toBe(400);
    expect(malformed.body.type).toBe(`${TYPE}PixDevolucaoInvalida`);

    const done = await waitFor(() => pix.get(`/pix/${paid.e2e}/devolucao/D1`), (res) => res.body?.status === 'DEVOLVIDO');
    expect(done.body).toMatchObject({ id: 'D1', rtrId: put.body.rtrId, status: 'DEVOLVIDO', horario: { liquidacao: expect.any(String) } });
    expect((await pix.get(`/pix/${paid.e2e}`)).body.devolucoes).toEqual([done.body]);
    const none = await pix.get(`/pix/${paid.e2e}/devolucao/NOPE`);
    expect(none.status).toBe(404);
    expect(none.body.type).toBe(`${TYPE}PixDevolucaoNaoEncontrada`);
    const unknownPix = await pix.put('/pix/E00000000202601010000aaaaaaaaaaa/devolucao/D9', { valor: '1.00' });
    expect(unknownPix.status).toBe(404);
  });

  it('scopes: a token without pix.write cannot return money (403 AcessoNegado)', async () => {
    const reader = await pixClientFor(s.url, m, 'pix.read');
    const paid = await paidCharge(1000);
    const res = await reader.put(`/pix/${paid.e2e}/devolucao/X1`, { valor: '1.00' });
    expect(res.status).toBe(403);
    expect(res.body.type).toBe(`${TYPE}AcessoNegado`);
    expect((await reader.get(`/webhook/${key}`)).status).toBe(403);
  });

  it('webhooks: PUT 200, GET one and the list, the callback to {webhookUrl}/pix, DELETE 204, then 404', async () => {
    const notMine = await pix.put('/webhook/someone@example.com', { webhookUrl: r.url });
    expect(notMine.status).toBe(400);
    expect(notMine.body).toMatchObject({ type: `${TYPE}WebhookOperacaoInvalida`, violacoes: [{ propriedade: 'chave' }] });
    const badUrl = await pix.put(`/webhook/${key}`, { webhookUrl: 'ftp://example.com' });
    expect(badUrl.status).toBe(400);
    expect(badUrl.body.violacoes[0].propriedade).toBe('webhook.webhookUrl');

    const put = await pix.put(`/webhook/${key}`, { webhookUrl: `${r.url}/api/webhook` });
    expect(put.status).toBe(200);
    expect(put.text).toBe('');
    const got = await pix.get(`/webhook/${key}`);
    expect(got.status).toBe(200);
    expect(got.body).toEqual({ webhookUrl: `${r.url}/api/webhook`, chave: key, criacao: expect.any(String) });
    const list = await pix.get('/webhook');
    expect(list.status).toBe(200);
    expect(list.body.webhooks).toEqual([got.body]);
    expect((await pix.get('/webhook?paginacao.paginaAtual=-1')).status).toBe(400);

    const paid = await paidCharge(777);
    await r.waitFor((all) => all.some((x) => x.path === '/api/webhook/pix' && x.body.pix.some((p: { endToEndId: string }) => p.endToEndId === paid.e2e)));
    const hit = r.received.find((x) => x.path === '/api/webhook/pix')!;
    expect(hit.body.pix[0]).toMatchObject({ endToEndId: paid.e2e, txid: paid.txid, valor: '7.77', chave: key });

    expect((await pix.delete(`/webhook/${key}`)).status).toBe(204);
    const gone = await pix.get(`/webhook/${key}`);
    expect(gone.status).toBe(404);
    expect(gone.body.type).toBe(`${TYPE}WebhookNaoEncontrado`);
    expect((await pix.delete(`/webhook/${key}`)).status).toBe(404);
  });

  it('a URL that cannot be decoded names no webhook: DELETE answers 404 (the standard lists no 400 for DELETE), a read 400', async () => {
    const del = await pix.delete('/webhook/%F1%82%00abc');
    expect(del.status).toBe(404);
    expect(del.body).toMatchObject({ type: `${TYPE}NaoEncontrado`, status: 404, detail: expect.stringContaining('percent-encoding') });
    const read = await pix.get('/webhook/%F1%82%00abc');
    expect(read.status).toBe(400);
    expect(read.body.type).toBe(`${TYPE}RequisicaoInvalida`);
  });
});

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { pixClientFor, type PixClient } from '../helpers/apiPix.js';
import { addPixKey, merchantWithKey, type MerchantFixture } from '../helpers/client.js';
import { BACKENDS } from '../helpers/db.js';
import { ManualClock } from '../helpers/fixtures.js';
import { startTestServer, type TestServer } from '../helpers/server.js';

const ERROR = 'https://pix.bcb.gov.br/api/v2/error/';
const T0 = Date.parse('2026-11-27T12:00:00Z');
const DAY = 86_400_000;
let seq = 0;
const newTxid = () => `lote${Date.now().toString(36)}${(seq++).toString(36).padStart(4, '0')}${'y'.repeat(20)}`.slice(0, 30);

/** Batches of due-date charges (`lotecobv`): per-item status and problem, every exchange checked against the standard. */
describe.each(BACKENDS)('API Pix lotecobv on %s', (backend) => {
  const clock = new ManualClock(T0);
  let s: TestServer;
  let m: MerchantFixture;
  let pix: PixClient;
  let key: string;
  let loteId = 100;

  beforeAll(async () => {
    s = await startTestServer({ backend, clock, workers: false });
    m = await merchantWithKey(s);
    key = await addPixKey(s, m.accountId, 'evp');
    pix = await pixClientFor(s.url, m);
  });
  afterAll(async () => s?.close());

  const cobv = (txid: string, over: Record<string, unknown> = {}) => ({
    txid,
    calendario: { dataDeVencimento: '2026-12-10' },
    devedor: { cpf: '52998224725', nome: 'Fulano de Tal' },
    valor: { original: '42.00' },
    chave: key,
    ...over,
  });

  it('PUT creates each request as PUT /cobv would: CRIADA, or NEGADA with its problem; GET /cobv lists the batch', async () => {
    const id = loteId++;
    const [a, b, bad] = [newTxid(), newTxid(), newTxid()];
    const res = await pix.put(`/lotecobv/${id}`, {
      descricao: 'Mensalidades de dezembro',
      cobsv: [cobv(a), cobv(b, { valor: { original: '10.00', multa: { modalidade: 1, valorPerc: '1.00' } } }), cobv(bad, { calendario: { dataDeVencimento: '2026-11-01' } })],
    });
    expect(res.status, res.text).toBe(202);
    const got = await pix.get(`/lotecobv/${id}`);
    expect(got.status).toBe(200);
    expect(got.body).toMatchObject({ id, descricao: 'Mensalidades de dezembro', criacao: new Date(T0).toISOString() });
    expect(got.body.cobsv.map((c: any) => [c.txid, c.status])).toEqual([
      [a, 'CRIADA'],
      [b, 'CRIADA'],
      [bad, 'NEGADA'],
    ]);
    expect(got.body.cobsv[2].problema).toMatchObject({ type: `${ERROR}CobVOperacaoInvalida`, status: 400, violacoes: [expect.objectContaining({ propriedade: 'cobv.calendario.dataDeVencimento' })] });
    expect(got.body.cobsv[0].criacao).toBe(new Date(T0).toISOString());
    const listed = await pix.get(`/cobv?inicio=${new Date(T0 - DAY).toISOString()}&fim=${new Date(T0 + DAY).toISOString()}&loteCobVId=${id}`);
    expect(listed.body.cobs.map((c: any) => c.txid).sort()).toEqual([a, b].sort());
    // A request refused in a batch cannot be created outside it.
    const alone = await pix.put(`/cobv/${bad}`, cobv(bad));
    expect([alone.status, alone.body.type]).toEqual([400, `${ERROR}CobVOperacaoInvalida`]);
  });

  it('PUT again with exactly the same txids re-sends them; other txids are refused; PATCH revises some of them', async () => {
    const id = loteId++;
    const [a, bad] = [newTxid(), newTxid()];
    expect((await pix.put(`/lotecobv/${id}`, { descricao: 'Lote', cobsv: [cobv(a), cobv(bad, { chave: 'nao-e-minha@example.com' })] })).status).toBe(202);
    const other = await pix.put(`/lotecobv/${id}`, { descricao: 'Lote', cobsv: [cobv(a)] });
    expect([other.status, other.body.type]).toEqual([400, `${ERROR}LoteCobVOperacaoInvalida`]);
    expect((await pix.put(`/lotecobv/${id}`, { descricao: 'Lote corrigido', cobsv: [cobv(a, { valor: { original: '43.00' } }), cobv(bad)] })).status).toBe(202);
    const got = await pix.get(`/lotecobv/${id}`);
    expect(got.body.descricao).toBe('Lote corrigido');
    expect(got.body.cobsv.map((c: any) => c.status)).toEqual(['CRIADA', 'CRIADA']);
    expect((await pix.get(`/cobv/${a}`)).body).toMatchObject({ revisao: 1, valor: { original: '43.00' } });
    const patched = await pix.patch(`/lotecobv/${id}`, { cobsv: [{ txid: bad, valor: { original: '44.00' } }] });
    expect(patched.status, patched.text).toBe(202);
    expect((await pix.get(`/cobv/${bad}`)).body).toMatchObject({ revisao: 1, valor: { original: '44.00' } });
    const stranger = await pix.patch(`/lotecobv/${id}`, { cobsv: [{ txid: newTxid(), valor: { original: '1.00' } }] });
    expect([stranger.status, stranger.body.type]).toEqual([400, `${ERROR}LoteCobVOperacaoInvalida`]);
    const missing = await pix.get(`/lotecobv/999999`);
    expect([missing.status, missing.body.type]).toEqual([404, `${ERROR}LoteCobVNaoEncontrado`]);
  });

  it('GET /lotecobv lists batches by creation time with their items', async () => {
    const res = await pix.get(`/lotecobv?inicio=${new Date(T0 - DAY).toISOString()}&fim=${new Date(T0 + DAY).toISOString()}`);
    expect(res.status).toBe(200);
    expect(res.body.lotes.length).toBeGreaterThanOrEqual(2);
    expect(res.body.parametros.paginacao).toMatchObject({ paginaAtual: 0 });
    const bad = await pix.get(`/lotecobv?inicio=${new Date(T0).toISOString()}&fim=${new Date(T0 - DAY).toISOString()}`);
    expect([bad.status, bad.body.type]).toEqual([400, `${ERROR}LoteCobVConsultaInvalida`]);
  });
});

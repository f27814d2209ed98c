import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { decodeBrCode } from '../../src/lib/brcode.js';
import { explainBrCode } from '../../src/lib/brcodeExplain.js';
import { expireDueCharges } from '../../src/pix/cashin/charges.js';
import { pixClientFor, type PixClient } from '../helpers/apiPix.js';
import { addPixKey, merchantWithKey, type MerchantFixture } from '../helpers/client.js';
import { BACKENDS } from '../helpers/db.js';
import { ManualClock, validAlphanumericCnpj, validCpf } from '../helpers/fixtures.js';
import { expectLedgerConsistent, sandbox } from '../helpers/pix.js';
import { startTestServer, type TestServer } from '../helpers/server.js';

const ERROR = 'https://pix.bcb.gov.br/api/v2/error/';
const DAY = 86_400_000;
// Friday 27 Nov 2026, 09:00 in Brasília.
const T0 = Date.parse('2026-11-27T12:00:00Z');
let seq = 0;
const newTxid = () => `cobv${Date.now().toString(36)}${(seq++).toString(36).padStart(4, '0')}${'x'.repeat(20)}`.slice(0, 30);

/** Due-date charges (`cobv`) through the API Pix façade: every exchange checked against the standard's document. */
describe.each(BACKENDS)('API Pix cobv on %s', (backend) => {
  const clock = new ManualClock(T0);
  let s: TestServer;
  let m: MerchantFixture;
  let pix: PixClient;
  let key: string;

  beforeAll(async () => {
    s = await startTestServer({ backend, clock, workers: false });
    m = await merchantWithKey(s);
    key = await addPixKey(s, m.accountId, 'evp');
    pix = await pixClientFor(s.url, m);
  });
  afterAll(async () => s?.close());

  const body = (over: Record<string, unknown> = {}) => ({
    calendario: { dataDeVencimento: '2026-12-02', validadeAposVencimento: 30 },
    devedor: { cnpj: '12ABC34501DE35', nome: 'Empresa Devedora Ltda' },
    valor: {
      original: '100.00',
      multa: { modalidade: 2, valorPerc: '2.00' },
      juros: { modalidade: 2, valorPerc: '0.10' },
      abatimento: { modalidade: 1, valorPerc: '5.00' },
      desconto: { modalidade: 1, descontoDataFixa: [{ data: '2026-11-30', valorPerc: '10.00' }] },
    },
    chave: key,
    solicitacaoPagador: 'Mensalidade de dezembro',
    ...over,
  });

  /** Pays the charge underneath with `cents` whatever is due: a static code on the key carrying the charge's txid. */
  async function pay(txid: string, cents: number) {
    const [row] = await s.ctx.db.query<{ charge_txid: string }>('SELECT pc.txid AS charge_txid FROM api_pix_cobvs v JOIN pix_charges pc ON pc.transaction_uuid = v.charge_id WHERE v.txid = $1', [txid]);
    const { encodeBrCode } = await import('../../src/lib/brcode.js');
    const emv = encodeBrCode({ key, amountCents: cents, merchantName: 'Loja', merchantCity: 'SAO PAULO', txid: row!.charge_txid });
    return sandbox(s, 'POST', '/pix/pay', { emv, payer_name: 'Pagador', payer_document: validCpf() });
  }

  it('PUT creates an ATIVA cobv with a location of type cobv and a dynamic BR Code every bank reads; GET reads it back', async () => {
    const txid = newTxid();
    const res = await pix.put(`/cobv/${txid}`, body());
    expect(res.status, res.text).toBe(201);
    expect(res.body).toMatchObject({
      calendario: { dataDeVencimento: '2026-12-02', validadeAposVencimento: 30, criacao: new Date(T0).toISOString() },
      txid,
      revisao: 0,
      status: 'ATIVA',
      devedor: { cnpj: '12ABC34501DE35', nome: 'Empresa Devedora Ltda' },
      recebedor: { nome: 'Loja Teste' },
      valor: body().valor,
      chave: key,
      loc: { tipoCob: 'cobv', txid },
    });
    expect(res.body.location).toBe(res.body.loc.location);
    const code = decodeBrCode(res.body.pixCopiaECola);
    expect(code).toMatchObject({ url: res.body.location, key: null, amountCents: null, txid: null });
    expect(explainBrCode(res.body.pixCopiaECola).findings).toEqual([]);
    // The pixgate charge underneath: the original amount, its due terms, payable to the end of the
    // last payable day in Brasília (2 Dec + 30 = 1 Jan, a holiday → Mon 4 Jan 2027).
    const [charge] = await s.ctx.db.query<{ amount: string; expires_at: Date; due_terms: any; status: string }>(
      'SELECT t.amount::text AS amount, pc.expires_at, pc.due_terms, pc.status FROM api_pix_cobvs v JOIN pix_charges pc ON pc.transaction_uuid = v.charge_id JOIN transactions t ON t.id = v.charge_id WHERE v.txid = $1',
      [txid],
    );
    expect(charge).toMatchObject({ amount: '1000000', status: 'created' });
    expect(charge!.expires_at.toISOString()).toBe('2027-01-05T03:00:00.000Z');
    expect(charge!.due_terms.calendar).toEqual({ dueDate: '2026-12-02', daysAfterDue: 30 });
    const got = await pix.get(`/cobv/${txid}`);
    expect(got.status).toBe(200);
    expect(got.body).toEqual(res.body);
  });

  it('the payload read: a JWS of the cobv with the amount due on DPP; the location shows its cobv', async () => {
    const txid = newTxid();
    const created = await pix.put(`/cobv/${txid}`, body());
    expect(created.body.location).toMatch(/^localhost\/qr\/v2\/cobv\/[0-9a-f]{32}$/);
    const path = created.body.location.slice('localhost'.length);
    const read = async (query: string) => {
      const res = await fetch(`${s.url}${path}${query}`);
      const text = await res.text();
      return { status: res.status, type: res.headers.get('content-type'), text, payload: res.status === 200 ? JSON.parse(Buffer.from(text.split('.')[1]!, 'base64url').toString()) : JSON.parse(text) };
    };
    const today = await read('');
    expect(today.status).toBe(200);
    expect(today.type).toContain('application/jose');
    expect(today.payload).toMatchObject({ txid, status: 'ATIVA', calendario: { dataDeVencimento: '2026-12-02', validadeAposVencimento: 30 }, valor: { original: '100.00', abatimento: '5.00', desconto: '10.00', final: '85.00' } });
    // 7 Dec, 5 days late: 95.00 + 2 % fine (1.90) + 0.10 %/day × 5 (0.48).
    expect((await read('?DPP=2026-12-07&codMun=3550308')).payload.valor).toEqual({ original: '100.00', abatimento: '5.00', multa: '1.90', juros: '0.48', final: '97.38' });
    for (const q of ['?DPP=2026-11-26', '?DPP=2027-01-05', '?DPP=amanha', '?codMun=123']) {
      const bad = await read(q);
      expect([q, bad.status, bad.payload.type]).toEqual([q, 400, `${ERROR}CobPayloadOperacaoInvalida`]);
    }
    expect((await read('?DPP=2027-01-04')).status).toBe(200); // the last payable day
    const loc = await pix.get(`/loc/${created.body.loc.id}`);
    expect(loc.body).toMatchObject({ id: created.body.loc.id, txid, tipoCob: 'cobv', location: created.body.location });
    const unknown = await fetch(`${s.url}/qr/v2/cobv/${'0'.repeat(32)}`);
    expect(unknown.status).toBe(404);
  });

  it('400 CobVOperacaoInvalida with violacoes for what the standard refuses', async () => {
    const cases: [Record<string, unknown>, string][] = [
      [{ calendario: { dataDeVencimento: '2026-11-26' } }, 'cobv.calendario.dataDeVencimento'],
      [{ calendario: { dataDeVencimento: '2026-12-02', validadeAposVencimento: -1 } }, 'cobv.calendario.validadeAposVencimento'],
      [{ valor: { original: '0.00' } }, 'cobv.valor.original'],
      [{ valor: { original: '10.00', abatimento: { modalidade: 1, valorPerc: '10.00' } } }, 'cobv.valor.abatimento'],
      [{ valor: { original: '10.00', abatimento: { modalidade: 2, valorPerc: '100.00' } } }, 'cobv.valor.abatimento'],
      [{ valor: { original: '10.00', desconto: { modalidade: 1, valorPerc: '1.00' } } }, 'cobv.valor.desconto'],
      [{ valor: { original: '10.00', desconto: { modalidade: 3 } } }, 'cobv.valor.desconto'],
      [{ valor: { original: '10.00', desconto: { modalidade: 2, descontoDataFixa: [{ data: '2026-12-03', valorPerc: '1.00' }] } } }, 'cobv.valor.desconto'],
      [{ valor: { original: '10.00', juros: { modalidade: 9, valorPerc: '1.00' } } }, 'cobv.valor.juros.modalidade'],
      [{ devedor: { cnpj: '12ABC34501DE36', nome: 'X' } }, 'cobv.devedor'],
      [{ devedor: { cpf: '52998224724', nome: 'X' } }, 'cobv.devedor'],
      [{ chave: 'ninguem@example.com' }, 'cobv.chave'],
    ];
    for (const [over, propriedade] of cases) {
      const res = await pix.put(`/cobv/${newTxid()}`, body(over));
      expect([over, res.status, res.body.type]).toEqual([over, 400, `${ERROR}CobVOperacaoInvalida`]);
      expect([over, res.body.violacoes.some((v: any) => String(v.propriedade).startsWith(propriedade))]).toEqual([over, true]);
    }
  });

  it('an alphanumeric or numeric CNPJ and a CPF debtor; list filters by debtor, status and dates', async () => {
    const cnpj = validAlphanumericCnpj();
    const cpf = validCpf();
    const a = await pix.put(`/cobv/${newTxid()}`, body({ devedor: { cnpj, nome: 'A' } }));
    const b = await pix.put(`/cobv/${newTxid()}`, body({ devedor: { cpf, nome: 'B', email: 'b@example.com', cidade: 'Recife', uf: 'PE' } }));
    expect([a.status, b.status]).toEqual([201, 201]);
    const inicio = new Date(T0 - DAY).toISOString();
    const fim = new Date(T0 + 365 * DAY).toISOString();
    const byCnpj = await pix.get(`/cobv?inicio=${inicio}&fim=${fim}&cnpj=${cnpj}`);
    expect(byCnpj.status).toBe(200);
    expect(byCnpj.body.cobs.map((c: any) => c.txid)).toEqual([a.body.txid]);
    expect(byCnpj.body.parametros.paginacao).toMatchObject({ paginaAtual: 0, quantidadeTotalDeItens: 1 });
    const byCpf = await pix.get(`/cobv?inicio=${inicio}&fim=${fim}&cpf=${cpf}&status=ATIVA`);
    expect(byCpf.body.cobs.map((c: any) => c.txid)).toEqual([b.body.txid]);
    const both = await pix.get(`/cobv?inicio=${inicio}&fim=${fim}&cpf=${cpf}&cnpj=${cnpj}`);
    expect([both.status, both.body.type]).toEqual([400, `${ERROR}CobVConsultaInvalida`]);
  });

  it('PATCH revises (revisao + 1, earlier revisions readable), removal comes alone and is final', async () => {
    const txid = newTxid();
    expect((await pix.put(`/cobv/${txid}`, body())).status).toBe(201);
    const revised = await pix.patch(`/cobv/${txid}`, { valor: { original: '150.00' }, solicitacaoPagador: 'Revisada' });
    expect(revised.status, revised.text).toBe(200);
    expect(revised.body).toMatchObject({ revisao: 1, status: 'ATIVA', valor: { original: '150.00', multa: { modalidade: 2, valorPerc: '2.00' } }, solicitacaoPagador: 'Revisada' });
    expect((await pix.get(`/cobv/${txid}?revisao=0`)).body).toMatchObject({ revisao: 0, valor: { original: '100.00' } });
    const none = await pix.get(`/cobv/${txid}?revisao=7`);
    expect([none.status, none.body.type]).toEqual([400, `${ERROR}CobVConsultaInvalida`]);
    const mixed = await pix.patch(`/cobv/${txid}`, { status: 'REMOVIDA_PELO_USUARIO_RECEBEDOR', solicitacaoPagador: 'x' });
    expect([mixed.status, mixed.body.type]).toEqual([400, `${ERROR}CobVOperacaoInvalida`]);
    const removed = await pix.patch(`/cobv/${txid}`, { status: 'REMOVIDA_PELO_USUARIO_RECEBEDOR' });
    expect(removed.body).toMatchObject({ revisao: 2, status: 'REMOVIDA_PELO_USUARIO_RECEBEDOR' });
    const again = await pix.patch(`/cobv/${txid}`, { solicitacaoPagador: 'y' });
    expect([again.status, again.body.type]).toEqual([400, `${ERROR}CobVOperacaoInvalida`]);
    const put = await pix.put(`/cobv/${txid}`, body());
    expect([put.status, put.body.type]).toEqual([400, `${ERROR}CobVOperacaoInvalida`]);
    const missing = await pix.get(`/cobv/${newTxid()}`);
    expect([missing.status, missing.body.type]).toEqual([404, `${ERROR}CobVNaoEncontrada`]);
  });

  it('paid on time with the fixed-date discount: the amount due is what pays it; CONCLUIDA with the Pix and its parts', async () => {
    const txid = newTxid();
    expect((await pix.put(`/cobv/${txid}`, body())).status).toBe(201);
    // 27 Nov, before the 30 Nov discount date: 100.00 − 5.00 rebate − 10.00 discount = 85.00.
    const wrong = await pay(txid, 10_000);
    expect(wrong.status).toBe(201);
    expect(wrong.body.charge).toMatchObject({ status: 'created' }); // not the amount due: credited as a plain Pix, the charge stays open
    expect((await pix.get(`/cobv/${txid}`)).body.status).toBe('ATIVA');
    // The payer's bank reads the dynamic code's location and pays what it shows for today.
    const emv = (await pix.get(`/cobv/${txid}`)).body.pixCopiaECola;
    const paid = await sandbox(s, 'POST', '/pix/pay', { emv, payer_name: 'Pagador', payer_document: validCpf() });
    expect(paid.status, JSON.stringify(paid.body)).toBe(201);
    expect(paid.body.amount).toBe(850_000);
    expect(paid.body.charge).toMatchObject({ status: 'paid' });
    const got = await pix.get(`/cobv/${txid}`);
    expect(got.body.status).toBe('CONCLUIDA');
    expect(got.body.pix).toEqual([
      {
        endToEndId: paid.body.end_to_end_id,
        txid,
        valor: '85.00',
        chave: key,
        horario: expect.any(String),
        componentesValor: { original: { valor: '100.00' }, abatimento: { valor: '5.00' }, desconto: { valor: '10.00' } },
      },
    ]);
    const [record] = await s.ctx.db.query<{ amount: string; status: number }>('SELECT t.amount::text AS amount, t.status FROM api_pix_cobvs v JOIN transactions t ON t.id = v.charge_id WHERE v.txid = $1', [txid]);
    expect(record).toEqual({ amount: '850000', status: 1 });
    await expectLedgerConsistent(s.ctx.db);
  });

  it('paid late: fine and interest by the day; past the last payable day the charge is REMOVIDA_PELO_PSP', async () => {
    const txid = newTxid();
    const late = newTxid();
    expect((await pix.put(`/cobv/${txid}`, body())).status).toBe(201);
    expect((await pix.put(`/cobv/${late}`, body({ calendario: { dataDeVencimento: '2026-12-02', validadeAposVencimento: 5 } }))).status).toBe(201);
    clock.advance(10 * DAY); // Mon 7 Dec: 5 days after the due date
    pix = await pixClientFor(s.url, m); // tokens live 10 minutes
    // base 95.00; fine 2 % = 1.90; interest 0.10 %/day × 5 = 0.475 → 0.48: 97.38
    const emv = (await pix.get(`/cobv/${txid}`)).body.pixCopiaECola;
    const paid = await sandbox(s, 'POST', '/pix/pay', { emv });
    expect(paid.body.charge, JSON.stringify(paid.body)).toMatchObject({ status: 'paid' });
    expect(paid.body.amount).toBe(973_800);
    // Paid: the location shows a charge no longer ATIVA.
    expect((await sandbox(s, 'POST', '/pix/pay', { emv })).status).toBe(409);
    const got = await pix.get(`/cobv/${txid}`);
    expect(got.body.status, got.text).toBe('CONCLUIDA');
    expect(got.body.pix[0].componentesValor).toEqual({ original: { valor: '100.00' }, abatimento: { valor: '5.00' }, multa: { valor: '1.90' }, juros: { valor: '0.48' } });
    clock.advance(2 * DAY); // Wed 9 Dec: past 7 Dec, the last payable day of the other
    pix = await pixClientFor(s.url, m);
    await expireDueCharges(s.ctx.db, clock);
    expect((await pix.get(`/cobv/${late}`)).body.status).toBe('REMOVIDA_PELO_PSP');
    clock.advance(-12 * DAY);
    pix = await pixClientFor(s.url, m);
  });
});

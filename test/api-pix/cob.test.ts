import { createPublicKey, verify } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { expireDueCharges } from '../../src/pix/cashin/charges.js';
import { decodeBrCode } from '../../src/lib/brcode.js';
import { pixClientFor, type PixClient } from '../helpers/apiPix.js';
import { API_PIX_STANDARD_MISSING, apiPixStandard } from '../helpers/apiPixStandard.js';
import { addPixKey, merchantWithKey, type MerchantFixture } from '../helpers/client.js';
import { BACKENDS } from '../helpers/db.js';
import { validCpf } from '../helpers/fixtures.js';
import { outbox, sandbox } from '../helpers/pix.js';
import { startTestServer, type TestServer } from '../helpers/server.js';

const ERR = 'https://pix.bcb.gov.br/api/v2/error/';
const standard = apiPixStandard();
let counter = 0;
/** A fresh client txid (26 to 35 letters and digits). */
const newTxid = () => `pixgateTeste${Date.now().toString(36)}${String(++counter).padStart(6, '0')}abcdefghij`.slice(0, 35);
const day = () => ({ inicio: new Date(Date.now() - 3_600_000).toISOString(), fim: new Date(Date.now() + 3_600_000).toISOString() });
const qs = (o: Record<string, string | number | boolean>) => new URLSearchParams(Object.entries(o).map(([k, v]): [string, string] => [k, String(v)])).toString();

/**
 * The `cob` and `loc` operations of the façade end to end over real sockets: every exchange is
 * checked against the standard's own document by the contract check (test/helpers/contract.ts →
 * apiPixContract.ts), so these tests skip without it.
 */
describe.skipIf(!standard).each(BACKENDS)(`API Pix cob and loc on %s${standard ? '' : ` (skipped: ${API_PIX_STANDARD_MISSING})`}`, (backend) => {
  let s: TestServer;
  let m: MerchantFixture;
  let pix: PixClient;
  let evp: string;

  beforeAll(async () => {
    s = await startTestServer({ backend, workers: false, env: { SIM_SEED: '27' } });
    m = await merchantWithKey(s, { name: 'Loja Padrão Açaí' });
    evp = await addPixKey(s, m.accountId, 'evp');
    pix = await pixClientFor(s.url, m);
  });
  afterAll(async () => s?.close());

  const cob = (over: Record<string, unknown> = {}) => ({ calendario: { expiracao: 3600 }, valor: { original: '123.45' }, chave: evp, solicitacaoPagador: 'Pedido 42', ...over });

  it('PUT /cob/{txid}: 201 ATIVA, revision 0, a new location, and a dynamic BR Code pointing at it', async () => {
    const txid = newTxid();
    const res = await pix.put(`/cob/${txid}`, cob({ devedor: { cpf: validCpf(), nome: 'Fulano de Tal' }, infoAdicionais: [{ nome: 'Campo 1', valor: 'Informação' }] }));
    expect(res.status).toBe(201);
    expect(res.body).toMatchObject({ txid, revisao: 0, status: 'ATIVA', valor: { original: '123.45' }, chave: evp, calendario: { expiracao: 3600 }, solicitacaoPagador: 'Pedido 42' });
    expect(res.body.loc).toEqual({ id: expect.any(Number), txid, location: res.body.location, tipoCob: 'cob', criacao: expect.any(String) });
    expect(res.body.location).toMatch(/^localhost(:\d+)?\/qr\/v2\/[0-9a-f]{32}$/);
    const code = decodeBrCode(res.body.pixCopiaECola);
    expect(code).toMatchObject({ key: null, url: res.body.location, amountCents: 12345, txid: null, singleUse: true, merchantName: 'Loja Padrao Acai' });
  });

  it('POST /cob: the PSP assigns a 32-character txid', async () => {
    const res = await pix.post('/cob', cob());
    expect(res.status).toBe(201);
    expect(res.body.txid).toMatch(/^[A-Za-z0-9]{32}$/);
    expect((await pix.get(`/cob/${res.body.txid}`)).body.txid).toBe(res.body.txid);
  });

  it('each cob is a pixgate charge: a pending statement record and pix.charge.created', async () => {
    const res = await pix.post('/cob', cob({ valor: { original: '10.00' } }));
    const [row] = await s.ctx.db.query<{ transaction_id: string; amount: string; status: number }>(
      'SELECT t.transaction_id, t.amount::text AS amount, t.status FROM api_pix_cobs c JOIN transactions t ON t.id = c.charge_id WHERE c.txid = $1',
      [res.body.txid],
    );
    expect(row!.amount).toBe('100000');
    expect((await outbox(s.ctx.db, row!.transaction_id)).map((e) => e.event)).toEqual(['pix.charge.created']);
  });

  it('400 CobOperacaoInvalida with violations: amount format, zero, key of another account, expiry, txid, withdrawal', async () => {
    const cases: Array<[string, unknown, string]> = [
      [newTxid(), cob({ valor: { original: '1,00' } }), 'cob.valor.original'],
      [newTxid(), cob({ valor: { original: '0.00' } }), 'cob.valor.original'],
      [newTxid(), cob({ chave: 'outra-conta@example.com' }), 'cob.chave'],
      [newTxid(), cob({ calendario: { expiracao: 0 } }), 'cob.calendario.expiracao'],
      [newTxid(), cob({ devedor: { cpf: '123', nome: 'X' } }), 'cob.devedor'],
      [newTxid(), cob({ valor: { original: '10.00', retirada: { saque: { valor: '5.00', modalidadeAgente: 'AGTEC', prestadorDoServicoDeSaque: '12345678' } } } }), 'cob.valor.retirada'],
      ['curto', cob(), 'cob.txid'],
    ];
    for (const [txid, body, property] of cases) {
      const res = await pix.put(`/cob/${txid}`, body);
      expect(res.status, JSON.stringify(body)).toBe(400);
      expect(res.headers.get('content-type')).toContain('application/problem+json');
      expect(res.body.type).toBe(`${ERR}CobOperacaoInvalida`);
      expect(res.body.violacoes.map((v: { propriedade: string }) => v.propriedade).join(' ')).toContain(property);
    }
    for (const notAnObject of ['-30609463225208330', '[]', '"x"', 'null']) {
      const txid = newTxid();
      expect((await pix.call('PUT', `/cob/${txid}`, notAnObject)).status, notAnObject).toBe(400);
      await pix.put(`/cob/${txid}`, cob());
      const patched = await pix.call('PATCH', `/cob/${txid}`, notAnObject);
      expect(patched.status, notAnObject).toBe(400);
      expect(patched.body.violacoes[0].propriedade).toBe('cob');
    }
    const noBody = await pix.call('PUT', `/cob/${newTxid()}`, '{broken');
    expect(noBody.status).toBe(400);
    expect(noBody.body.type).toBe(`${ERR}CobOperacaoInvalida`);
  });

  it('txid is unique per receiver: another account may use the same txid', async () => {
    const txid = newTxid();
    expect((await pix.put(`/cob/${txid}`, cob())).status).toBe(201);
    const other = await merchantWithKey(s);
    const otherKey = await addPixKey(s, other.accountId, 'evp');
    const otherPix = await pixClientFor(s.url, other);
    const res = await otherPix.put(`/cob/${txid}`, cob({ chave: otherKey }));
    expect(res.status).toBe(201);
    expect((await otherPix.get(`/cob/${txid}`)).body.chave).toBe(otherKey);
    expect((await pix.get(`/cob/${txid}`)).body.chave).toBe(evp);
  });

  it('PATCH revises (revisao + 1, a new BR Code), GET ?revisao= shows earlier ones; PUT over an ATIVA txid is a revision too', async () => {
    const txid = newTxid();
    const created = await pix.put(`/cob/${txid}`, cob());
    const patched = await pix.patch(`/cob/${txid}`, { valor: { original: '200.00' }, solicitacaoPagador: 'Pedido 43' });
    expect(patched.status).toBe(200);
    expect(patched.body).toMatchObject({ revisao: 1, status: 'ATIVA', valor: { original: '200.00' }, solicitacaoPagador: 'Pedido 43' });
    expect(patched.body.pixCopiaECola).not.toBe(created.body.pixCopiaECola);
    expect(decodeBrCode(patched.body.pixCopiaECola).amountCents).toBe(20000);
    const first = await pix.get(`/cob/${txid}?revisao=0`);
    expect(first.body).toMatchObject({ revisao: 0, valor: { original: '123.45' } });
    const unchanged = await pix.patch(`/cob/${txid}`, {});
    expect(unchanged.body.revisao).toBe(1);
    const none = await pix.get(`/cob/${txid}?revisao=7`);
    expect(none.status).toBe(400);
    expect(none.body.type).toBe(`${ERR}CobConsultaInvalida`);
    const replaced = await pix.put(`/cob/${txid}`, cob({ valor: { original: '1.99' }, solicitacaoPagador: undefined }));
    expect(replaced.status).toBe(201);
    expect(replaced.body).toMatchObject({ revisao: 2, valor: { original: '1.99' } });
    expect(replaced.body.solicitacaoPagador).toBeUndefined();
  });

  it('PATCH status REMOVIDA_PELO_USUARIO_RECEBEDOR removes it (the charge underneath is cancelled); it is then unchangeable', async () => {
    const txid = newTxid();
    await pix.put(`/cob/${txid}`, cob());
    const mixed = await pix.patch(`/cob/${txid}`, { status: 'REMOVIDA_PELO_USUARIO_RECEBEDOR', valor: { original: '2.00' } });
    expect(mixed.status).toBe(400);
    const removed = await pix.patch(`/cob/${txid}`, { status: 'REMOVIDA_PELO_USUARIO_RECEBEDOR' });
    expect(removed.status).toBe(200);
    expect(removed.body).toMatchObject({ status: 'REMOVIDA_PELO_USUARIO_RECEBEDOR', revisao: 1 });
    const again = await pix.patch(`/cob/${txid}`, { valor: { original: '2.00' } });
    expect(again.status).toBe(400);
    expect(again.body.type).toBe(`${ERR}CobOperacaoInvalida`);
    const pay = await sandbox(s, 'POST', '/pix/pay', { emv: removed.body.pixCopiaECola });
    expect(pay.status).toBe(409);
  });

  it('404 CobNaoEncontrado for an unknown txid (GET, PATCH)', async () => {
    for (const res of [await pix.get(`/cob/${newTxid()}`), await pix.patch(`/cob/${newTxid()}`, { valor: { original: '1.00' } })]) {
      expect(res.status).toBe(404);
      expect(res.body).toEqual({ type: `${ERR}CobNaoEncontrado`, title: 'Recurso não encontrado', status: 404, detail: expect.any(String) });
    }
  });

  it('GET /cob lists by inicio/fim with filters and paginacao; inicio and fim are required', async () => {
    const own = await merchantWithKey(s);
    const key = await addPixKey(s, own.accountId, 'evp');
    const c = await pixClientFor(s.url, own, 'cob.read cob.write');
    const cpf = validCpf();
    const txids: string[] = [];
    for (let i = 0; i < 3; i++) txids.push((await c.post('/cob', cob({ chave: key, devedor: i === 0 ? { cpf, nome: 'Devedor' } : undefined }))).body.txid);
    await c.patch(`/cob/${txids[2]}`, { status: 'REMOVIDA_PELO_USUARIO_RECEBEDOR' });
    const all = await c.get(`/cob?${qs({ ...day(), 'paginacao.itensPorPagina': 2 })}`);
    expect(all.status).toBe(200);
    expect(all.body.parametros.paginacao).toEqual({ paginaAtual: 0, itensPorPagina: 2, quantidadeDePaginas: 2, quantidadeTotalDeItens: 3 });
    expect(all.body.cobs.map((x: { txid: string }) => x.txid)).toEqual(txids.slice(0, 2));
    const second = await c.get(`/cob?${qs({ ...day(), 'paginacao.itensPorPagina': 2, 'paginacao.paginaAtual': 1 })}`);
    expect(second.body.cobs.map((x: { txid: string }) => x.txid)).toEqual([txids[2]]);
    expect((await c.get(`/cob?${qs({ ...day(), cpf })}`)).body.cobs.map((x: { txid: string }) => x.txid)).toEqual([txids[0]]);
    expect((await c.get(`/cob?${qs({ ...day(), status: 'REMOVIDA_PELO_USUARIO_RECEBEDOR' })}`)).body.cobs.map((x: { txid: string }) => x.txid)).toEqual([txids[2]]);
    const missing = await c.get(`/cob?${qs({ inicio: day().inicio })}`);
    expect(missing.status).toBe(400);
    expect(missing.body.type).toBe(`${ERR}CobConsultaInvalida`);
    const backwards = await c.get(`/cob?${qs({ inicio: day().fim, fim: day().inicio })}`);
    expect(backwards.status).toBe(400);
    const both = await c.get(`/cob?${qs({ ...day(), cpf, cnpj: '12345678000195' })}`);
    expect(both.status).toBe(400);
  });

  it('403 AcessoNegado without the scope', async () => {
    const readOnly = await pixClientFor(s.url, m, 'cob.read');
    const res = await readOnly.put(`/cob/${newTxid()}`, cob());
    expect(res.status).toBe(403);
    expect(res.body).toEqual({ type: `${ERR}AcessoNegado`, title: 'Acesso negado', status: 403, detail: 'O access_token não tem o escopo cob.write exigido por esta operação' });
    expect((await readOnly.post('/loc', { tipoCob: 'cob' })).status).toBe(403);
  });

  it('loc: create, read, link to a cob, refuse a second cob and a cobv location, unlink, list', async () => {
    const made = await pix.post('/loc', { tipoCob: 'cob' });
    expect(made.status).toBe(201);
    expect(made.body).toEqual({ id: expect.any(Number), location: expect.stringMatching(/\/qr\/v2\/[0-9a-f]{32}$/), tipoCob: 'cob', criacao: expect.any(String) });
    expect(made.headers.get('location')).toBe(made.body.location);
    const id = made.body.id as number;
    const txid = newTxid();
    const linked = await pix.put(`/cob/${txid}`, cob({ loc: { id, tipoCob: 'cob' } }));
    expect(linked.status).toBe(201);
    expect(linked.body.location).toBe(made.body.location);
    expect((await pix.get(`/loc/${id}`)).body).toEqual({ ...made.body, txid });
    const taken = await pix.put(`/cob/${newTxid()}`, cob({ loc: { id, tipoCob: 'cob' } }));
    expect(taken.status).toBe(400);
    expect(taken.body.violacoes[0].propriedade).toBe('cob.loc.id');
    const cobv = await pix.post('/loc', { tipoCob: 'cobv' });
    expect((await pix.put(`/cob/${newTxid()}`, cob({ loc: { id: cobv.body.id, tipoCob: 'cob' } }))).status).toBe(400);
    expect((await pix.put(`/cob/${newTxid()}`, cob({ loc: { id: 999_999_999, tipoCob: 'cob' } }))).status).toBe(400);

    const listed = await pix.get(`/loc?${qs({ ...day(), txIdPresente: true, tipoCob: 'cob' })}`);
    expect(listed.status).toBe(200);
    expect(listed.body.loc.map((l: { id: number }) => l.id)).toContain(id);
    expect(listed.body.loc.every((l: { txid?: string }) => typeof l.txid === 'string')).toBe(true);

    const unlinked = await pix.delete(`/loc/${id}/txid`);
    expect(unlinked.status).toBe(200);
    expect(unlinked.body).toEqual(made.body);
    const after = await pix.get(`/cob/${txid}`);
    expect(after.body.loc).toBeUndefined();
    expect(after.body.pixCopiaECola).toBeUndefined();
    expect((await pix.get(`/loc/${id}`)).body.txid).toBeUndefined();
    const relinked = await pix.patch(`/cob/${txid}`, { loc: { id, tipoCob: 'cob' } });
    expect(relinked.status).toBe(200);
    expect(relinked.body.location).toBe(made.body.location);
    expect(relinked.body.pixCopiaECola).toBeDefined();
  });

  it('loc refusals: unknown id (404 PayloadLocationNaoEncontrado), bad tipoCob (400), list without inicio (400)', async () => {
    const unknown = await pix.get('/loc/987654321');
    expect(unknown.status).toBe(404);
    expect(unknown.body.type).toBe(`${ERR}PayloadLocationNaoEncontrado`);
    expect((await pix.delete('/loc/abc/txid')).status).toBe(404);
    expect((await pix.delete('/loc/%00/txid')).status).toBe(404); // a malformed URL names no location
    expect((await pix.get('/loc/%E0%A4%A')).status).toBe(400);
    const bad = await pix.post('/loc', { tipoCob: 'cobr' });
    expect(bad.status).toBe(400);
    expect(bad.body.type).toBe(`${ERR}PayloadLocationOperacaoInvalida`);
    const list = await pix.get('/loc');
    expect(list.status).toBe(400);
    expect(list.body.type).toBe(`${ERR}PayloadLocationConsultaInvalida`);
  });

  it('the sandbox pays the pixCopiaECola: the cob becomes CONCLUIDA with its Pix, and the charge is paid in pixgate', async () => {
    const txid = newTxid();
    const created = await pix.put(`/cob/${txid}`, cob({ valor: { original: '57.30' } }));
    const paid = await sandbox(s, 'POST', '/pix/pay', { emv: created.body.pixCopiaECola, payer_name: 'Pagador Sandbox' });
    expect(paid.status).toBe(201);
    expect(paid.body.charge).toEqual({ transaction_id: expect.any(String), status: 'paid' });
    const read = await pix.get(`/cob/${txid}`);
    expect(read.body.status).toBe('CONCLUIDA');
    expect(read.body.pix).toEqual([{ endToEndId: paid.body.end_to_end_id, txid, valor: '57.30', chave: evp, horario: expect.any(String) }]);
    expect((await outbox(s.ctx.db, paid.body.charge.transaction_id)).map((e) => e.event)).toEqual(['pix.charge.created', 'pix.charge.paid']);
    const listed = await pix.get(`/cob?${qs({ ...day(), status: 'CONCLUIDA' })}`);
    expect(listed.body.cobs.map((x: { txid: string }) => x.txid)).toContain(txid);
    expect((await pix.patch(`/cob/${txid}`, { valor: { original: '1.00' } })).status).toBe(400);
    expect((await sandbox(s, 'POST', '/pix/pay', { emv: created.body.pixCopiaECola })).status).toBe(409);
  });

  it('a revision of the amount: the code at the same location pays the revised amount (the payer’s bank reads the location)', async () => {
    const txid = newTxid();
    await pix.put(`/cob/${txid}`, cob({ valor: { original: '10.00' } }));
    const revised = await pix.patch(`/cob/${txid}`, { valor: { original: '11.00' } });
    const paid = await sandbox(s, 'POST', '/pix/pay', { emv: revised.body.pixCopiaECola });
    expect(paid.status).toBe(201);
    expect(paid.body.amount).toBe(110000);
    expect((await pix.get(`/cob/${txid}`)).body.status).toBe('CONCLUIDA');
  });

  it('the location serves the charge as a signed JWS (application/jose) that the JWK set verifies; 404 when it shows no ATIVA charge', async () => {
    const txid = newTxid();
    const created = await pix.put(`/cob/${txid}`, cob({ devedor: { cpf: validCpf(), nome: 'Fulano' } }));
    const path = String(created.body.location).slice(String(created.body.location).indexOf('/'));
    const res = await fetch(`${s.url}${path}`);
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toContain('application/jose');
    const [header, payload, signature] = (await res.text()).split('.');
    const keys = (await (await fetch(`${s.url}/api/pix/jwks.json`)).json()) as { keys: Array<Record<string, string>> };
    const { kid } = JSON.parse(Buffer.from(header!, 'base64url').toString()) as { kid: string };
    const jwk = keys.keys.find((k) => k.kid === kid)!;
    // The installation's key (every process signs with the one the set publishes).
    const [stored] = await s.ctx.db.query<{ kid: string }>('SELECT kid FROM api_pix_signing_key');
    expect(kid).toBe(stored!.kid);
    const ok = verify('sha256', Buffer.from(`${header}.${payload}`), createPublicKey({ key: jwk, format: 'jwk' }), Buffer.from(signature!, 'base64url'));
    expect(ok).toBe(true);
    const body = JSON.parse(Buffer.from(payload!, 'base64url').toString());
    expect(body).toMatchObject({ txid, revisao: 0, status: 'ATIVA', valor: { original: '123.45' }, chave: evp, calendario: { expiracao: 3600 } });
    await pix.patch(`/cob/${txid}`, { status: 'REMOVIDA_PELO_USUARIO_RECEBEDOR' });
    const gone = await fetch(`${s.url}${path}`);
    expect(gone.status).toBe(404);
    expect(((await gone.json()) as { type: string }).type).toBe(`${ERR}CobPayloadNaoEncontrado`);
  });

  it('past its expiry the charge is removed by the PSP (REMOVIDA_PELO_PSP) and cannot be paid', async () => {
    const txid = newTxid();
    const created = await pix.put(`/cob/${txid}`, cob({ calendario: { expiracao: 1 } }));
    expect(await expireDueCharges(s.ctx.db, { now: () => new Date(Date.now() + 5_000) })).toBeGreaterThanOrEqual(1);
    expect((await pix.get(`/cob/${txid}`)).body.status).toBe('REMOVIDA_PELO_PSP');
    expect((await sandbox(s, 'POST', '/pix/pay', { emv: created.body.pixCopiaECola })).status).toBe(409);
    expect((await pix.patch(`/cob/${txid}`, { valor: { original: '1.00' } })).status).toBe(400);
  });
});

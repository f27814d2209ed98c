import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SimulatedRail } from '../../src/rail/sim/simulatedRail.js';
import { merchantWithKey, type MerchantFixture } from '../helpers/client.js';
import { BACKENDS } from '../helpers/db.js';
import { ManualClock } from '../helpers/fixtures.js';
import { finalRecord, ledgerOf, medEvents, received, reportInfraction, resolveInfraction } from '../helpers/med.js';
import { balances, expectLedgerConsistent, SIM_FAST } from '../helpers/pix.js';
import { startTestServer, type TestServer } from '../helpers/server.js';

/**
 * The merchant's MED API: GET /med, GET /med/:id (payment:read), POST /med/:id/defense
 * (payment:write, signed) — success, permission, HMAC and bad-input paths (docs/med.md).
 */

const ISO = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;
const NO_SUCH_ID = '6f1c2a8e-3b4d-4e5f-9a0b-1c2d3e4f5a6b';

describe.each(BACKENDS)('MED merchant API on %s', (backend) => {
  let s: TestServer;
  let m: MerchantFixture;
  /** Infractions of m, oldest first: [OPEN, CLOSED (rejected), OPEN]. */
  const ids: string[] = [];
  const e2es: string[] = [];
  beforeAll(async () => {
    s = await startTestServer({ backend, env: SIM_FAST });
    m = await merchantWithKey(s, { depositCents: 10_000 });
    for (const cents of [1000, 2000, 3000]) {
      const original = await received(s, m, cents);
      e2es.push(original.end_to_end_id);
      ids.push((await reportInfraction(s, { end_to_end_id: original.end_to_end_id, reason: `case ${cents}` })).body.id);
    }
    await resolveInfraction(s, ids[1]!, 'rejected');
  });
  afterAll(async () => {
    if (s) await expectLedgerConsistent(s.ctx.db);
    await s?.close();
  });

  it('GET /med lists the account’s infractions newest first, filtered by status and end_to_end_id, paginated', async () => {
    const all = await m.client.get('/med');
    expect(all.status).toBe(200);
    expect(all.body).toMatchObject({ worked: true, page: 1, per_page: 20 });
    expect(all.body.data.map((d: any) => d.id)).toEqual([...ids].reverse());
    expect(all.body.data[0]).toMatchObject({ status: 'OPEN', reason: 'case 3000', amount: 300_000, blocked_amount: 300_000, end_to_end_id: e2es[2] });

    expect((await m.client.get('/med?status=OPEN')).body.data.map((d: any) => d.id)).toEqual([ids[2], ids[0]]);
    expect((await m.client.get('/med?status=CLOSED')).body.data.map((d: any) => [d.id, d.decision])).toEqual([[ids[1], 'rejected']]);
    expect((await m.client.get('/med?status=CANCELLED')).body.data).toEqual([]);
    expect((await m.client.get(`/med?end_to_end_id=${e2es[0]}`)).body.data.map((d: any) => d.id)).toEqual([ids[0]]);
    const today = new Date().toISOString().slice(0, 10);
    expect((await m.client.get(`/med?date_from=${today}&date_to=${today}`)).body.data).toHaveLength(3);
    expect((await m.client.get('/med?date_to=2020-01-01')).body.data).toEqual([]);

    const page2 = await m.client.get('/med?per_page=2&page=2');
    expect(page2.body).toMatchObject({ page: 2, per_page: 2 });
    expect(page2.body.data.map((d: any) => d.id)).toEqual([ids[0]]);

    // Another merchant sees none of them.
    const other = await merchantWithKey(s);
    expect((await other.client.get('/med')).body).toEqual({ worked: true, data: [], page: 1, per_page: 20 });
  });

  it('GET /med: bad parameters are 400 with a field map', async () => {
    const res = await m.client.get('/med?status=open&page=0&per_page=101&date_from=2026-02-30&end_to_end_id=PIXIN1');
    expect(res.status).toBe(400);
    expect(res.body).toEqual({
      errors: {
        bad_request: {
          status: ['must be one of: OPEN, defense_submitted, CLOSED, CANCELLED'],
          page: ['must be greater than or equal to 1'],
          per_page: ['must be less than or equal to 100'],
          date_from: ['must be a date YYYY-MM-DD'],
          end_to_end_id: ['must be an end-to-end id (E + ISPB + date + 11 characters)'],
        },
      },
    });
    expect((await m.client.get('/med?date_from=2026-03-02&date_to=2026-03-01')).body).toEqual({ errors: { bad_request: { date_to: ['must not be before date_from'] } } });
  });

  it('GET /med/:id: the MED record; a malformed id is 400, an unknown one or another merchant’s 404', async () => {
    const res = await m.client.get(`/med/${ids[1]}`);
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({
      worked: true,
      id: ids[1],
      status: 'CLOSED',
      decision: 'rejected',
      reason: 'case 2000',
      end_to_end_id: e2es[1],
      original_amount: 200_000,
      amount: 200_000,
      blocked_amount: 0,
      released_amount: 200_000,
      refund: { status: 'released', transaction_id: null },
      resolved_at: expect.stringMatching(ISO),
    });
    expect((await m.client.get(`/med/${ids[1]!.toUpperCase()}`)).body.id).toBe(ids[1]);
    expect(await m.client.get('/med/42')).toMatchObject({ status: 400, body: { errors: { bad_request: 'id must be a valid UUID' } } });
    expect(await m.client.get(`/med/${NO_SUCH_ID}`)).toMatchObject({ status: 404, body: { errors: { not_found: 'Infraction not found' } } });
    const other = await merchantWithKey(s);
    expect(await other.client.get(`/med/${ids[0]}`)).toMatchObject({ status: 404, body: { errors: { not_found: 'Infraction not found' } } });
    expect(await other.client.post(`/med/${ids[0]}/defense`, { text: 'not mine' })).toMatchObject({ status: 404, body: { errors: { not_found: 'Infraction not found' } } });
  });

  it('permissions: GET /med and /med/:id need payment:read, the defense payment:write (403, permission shape)', async () => {
    const writer = await merchantWithKey(s, { permissions: ['payment:write', 'transfer:read'] });
    expect(await writer.client.get('/med')).toMatchObject({ status: 403, body: { error: 'forbidden', message: 'API key lacks permission: payment:read' } });
    expect(await writer.client.get(`/med/${ids[0]}`)).toMatchObject({ status: 403, body: { error: 'forbidden', message: 'API key lacks permission: payment:read' } });
    const reader = await merchantWithKey(s, { permissions: ['payment:read'] });
    expect(await reader.client.post(`/med/${ids[0]}/defense`, { text: 'x' })).toMatchObject({
      status: 403,
      body: { error: 'forbidden', message: 'API key lacks permission: payment:write' },
    });
  });

  it('POST /med/:id/defense is signed: without the hmac header 401, with a wrong one 401, nothing stored', async () => {
    expect(await m.client.post(`/med/${ids[0]}/defense`, { text: 'unsigned' }, { sign: false })).toMatchObject({
      status: 401,
      body: { worked: false, detail: 'Missing HMAC header' },
    });
    expect(await m.client.post(`/med/${ids[0]}/defense`, { text: 'forged' }, { hmac: 'ab'.repeat(64) })).toMatchObject({
      status: 401,
      body: { worked: false, detail: 'Invalid HMAC signature' },
    });
    expect((await m.client.get(`/med/${ids[0]}`)).body).toMatchObject({ status: 'OPEN', defense: null });
  });

  it('POST /med/:id/defense: bad bodies are 400 with a field map, nothing stored', async () => {
    const long = 'x'.repeat(5001);
    const cases: [unknown, Record<string, string[]>][] = [
      [{}, { text: ['is required'] }],
      [{ text: '   ' }, { text: ["can't be blank"] }],
      [{ text: long }, { text: ['is too long (maximum is 5000 characters)'] }],
      [{ text: 'ok', attachments: 'https://example.com/a.pdf' }, { attachments: ['must be an array'] }],
      [{ text: 'ok', attachments: [{ name: 'both', url: 'https://example.com/a.pdf', text: 'and text' }] }, { 'attachments.0': ['must have exactly one of url or text'] }],
      [{ text: 'ok', attachments: [{ name: 'neither' }] }, { 'attachments.0': ['must have exactly one of url or text'] }],
      [{ text: 'ok', attachments: [{ url: 'ftp://example.com/a.pdf' }] }, { 'attachments.0.url': ['must be an http or https URL'] }],
      [{ text: 'ok', attachments: [{ url: 'not a url' }] }, { 'attachments.0.url': ['must be an http or https URL'] }],
      [{ text: 'ok', attachments: [{ text: 'x', size: 3 }] }, { 'attachments.0.size': ['is not a permitted field'] }],
      [{ text: 'ok', attachments: Array.from({ length: 11 }, () => ({ text: 'x' })) }, { attachments: ['must have at most 10 items'] }],
      [{ text: 'ok', evidence: 'x' }, { evidence: ['is not a permitted field'] }],
    ];
    for (const [body, fields] of cases) {
      const res = await m.client.post(`/med/${ids[0]}/defense`, body);
      expect(res.status, JSON.stringify(body)).toBe(400);
      expect(res.body).toEqual({ errors: { bad_request: fields } });
    }
    // Found by the OpenAPI fuzzer on PostgreSQL: a lone surrogate reached the jsonb column (500).
    for (const text of ['{"text": "\\udfff"}', '{"text":"ok","attachments":[{"text":"a\\ud800"}]}', '{"text":"ok","\\udc00":1}']) {
      const res = await m.client.post(`/med/${ids[0]}/defense`, text);
      expect(res.status, text).toBe(400);
      expect(res.body).toEqual({ errors: { bad_request: 'Request body strings must not contain an unpaired UTF-16 surrogate' } });
    }
    expect(await m.client.post('/med/not-an-id/defense', { text: 'ok' })).toMatchObject({ status: 400, body: { errors: { bad_request: 'id must be a valid UUID' } } });
    expect(await m.client.post(`/med/${NO_SUCH_ID}/defense`, { text: 'ok' })).toMatchObject({ status: 404, body: { errors: { not_found: 'Infraction not found' } } });
    expect((await m.client.get(`/med/${ids[0]}`)).body).toMatchObject({ status: 'OPEN', defense: null });
  });

  it('POST /med/:id/defense stores the defense: 201, status defense_submitted, pix.infraction.defense_submitted; a repeat with the same Idempotency-Key is replayed, a second defense is 422', async () => {
    const body = {
      text: '  Produto entregue em 12/03; nota fiscal e rastreio anexos.  ',
      attachments: [
        { name: 'nota-fiscal.pdf', url: 'https://docs.example.com/nf/123.pdf' },
        { name: 'rastreio', text: 'Objeto entregue ao destinatário em 12/03/2026 14:02' },
        { url: 'http://evidence.example.com/chat' },
      ],
    };
    const res = await m.client.post(`/med/${ids[0]}/defense`, body, { idempotencyKey: 'defense-0001' });
    expect(res.status).toBe(201);
    const defense = {
      text: 'Produto entregue em 12/03; nota fiscal e rastreio anexos.',
      attachments: [
        { name: 'nota-fiscal.pdf', url: 'https://docs.example.com/nf/123.pdf' },
        { name: 'rastreio', text: 'Objeto entregue ao destinatário em 12/03/2026 14:02' },
        { url: 'http://evidence.example.com/chat' },
      ],
    };
    expect(res.body).toMatchObject({ worked: true, id: ids[0], status: 'defense_submitted', defense: { ...defense, submitted_at: expect.stringMatching(ISO) } });
    expect((await m.client.get(`/med/${ids[0]}`)).body).toEqual(res.body);

    const events = await medEvents(s.ctx.db, ids[0]!);
    expect(events.map((e) => e.event)).toEqual(['pix.infraction.created', 'pix.refund.requested', 'pix.infraction.defense_submitted']);
    expect(events[2]!.payload).toMatchObject({
      status: 'defense_submitted',
      infraction_id: ids[0],
      end_to_end_id: e2es[0],
      defense,
      defense_submitted_at: res.body.defense.submitted_at,
    });

    const replay = await m.client.post(`/med/${ids[0]}/defense`, body, { idempotencyKey: 'defense-0001' });
    expect(replay.status).toBe(201);
    expect(replay.headers.get('x-idempotent-replay')).toBe('true');
    expect(replay.text).toBe(res.text);

    const again = await m.client.post(`/med/${ids[0]}/defense`, { text: 'Outra defesa' });
    expect(again.status).toBe(422);
    expect(again.body).toEqual({ errors: { unprocessable_entity: 'A defense was already submitted for this infraction' } });
    expect((await medEvents(s.ctx.db, ids[0]!)).filter((e) => e.event === 'pix.infraction.defense_submitted')).toHaveLength(1);

    // A defended infraction is still open: the decision resolves it.
    expect((await resolveInfraction(s, ids[0]!, 'cancelled')).body).toMatchObject({ status: 'CANCELLED', decision: 'cancelled', defense: { text: defense.text } });
  });

  it('POST /med/:id/defense on a resolved infraction is 422', async () => {
    const res = await m.client.post(`/med/${ids[1]}/defense`, { text: 'Tarde demais' });
    expect(res.status).toBe(422);
    expect(res.body).toEqual({ errors: { unprocessable_entity: 'The infraction is CLOSED; a defense can only be submitted while it is OPEN' } });
  });

  it('X-Key-Case: camelCase answers the MED record in camelCase', async () => {
    const res = await m.client.get(`/med/${ids[2]}`, { camelCase: true });
    expect(res.body).toMatchObject({ worked: true, id: ids[2], endToEndId: e2es[2], blockedAmount: 300_000, defenseDeadline: expect.stringMatching(ISO), refund: { status: 'requested', transactionId: null } });
  });
});

describe.each(BACKENDS)('MED deadlines on %s', (backend) => {
  const clock = new ManualClock(Date.parse('2026-01-05T10:00:00.000Z'));
  let s: TestServer;
  let m: MerchantFixture;
  beforeAll(async () => {
    s = await startTestServer({ backend, clock, workers: false, env: { SIM_SETTLEMENT_MS: '0', SIM_SEED: '5' } });
    m = await merchantWithKey(s);
  });
  afterAll(async () => {
    if (s) await expectLedgerConsistent(s.ctx.db);
    await s?.close();
  });

  it('a defense is accepted until the defense deadline (7 days after the report), then 422', async () => {
    const original = await received(s, m, 1000);
    const reported = (await reportInfraction(s, { end_to_end_id: original.end_to_end_id })).body;
    expect(reported.defense_deadline).toBe('2026-01-12T10:00:00.000Z');
    clock.advance(7 * 86_400_000);
    const res = await m.client.post(`/med/${reported.id}/defense`, { text: 'Entregue' });
    expect(res.status).toBe(422);
    expect(res.body).toEqual({ errors: { unprocessable_entity: 'The defense deadline passed at 2026-01-12T10:00:00.000Z' } });
    clock.advance(-1);
    expect((await m.client.post(`/med/${reported.id}/defense`, { text: 'Entregue' })).status).toBe(201);
  });

  it('a MED return the central bank rejects (past the 80-day MED window) fails: pix.refund.failed, the funds go back to available', async () => {
    const m = await merchantWithKey(s);
    const original = await received(s, m, 2000);
    clock.advance(81 * 86_400_000);
    const id = (await reportInfraction(s, { end_to_end_id: original.end_to_end_id, reason: 'operational_flaw' })).body.id;
    const resolved = (await resolveInfraction(s, id, 'accepted')).body;
    const refundId = resolved.refund.transaction_id;
    await (s.ctx.rail as SimulatedRail).tick(); // the simulated central bank judges the return now
    const failed = await finalRecord(s, refundId);
    expect(failed).toMatchObject({ status: 4, payment_status: 'failed', return_code: 'BE08', reason_code: 'RETURN_DEADLINE_EXCEEDED' });
    expect(await balances(s.ctx.db, m.accountId)).toMatchObject({ blocked: 0, pending: 0 });
    expect(await ledgerOf(s.ctx.db, refundId)).toEqual([
      ['med_refund_reverse', `account:${m.accountId}:blocked`, -200_000],
      ['med_refund_reverse', `account:${m.accountId}:available`, 200_000],
    ]);
    expect((await m.client.get(`/med/${id}`)).body).toMatchObject({ status: 'CLOSED', blocked_amount: 0, refunded_amount: 0, released_amount: 200_000, refund: { status: 'failed', transaction_id: refundId } });
    const events = await medEvents(s.ctx.db, id);
    expect(events.map((e) => e.event)).toEqual(['pix.infraction.created', 'pix.refund.requested', 'pix.infraction.resolved', 'pix.refund.failed']);
    expect(events[3]!.payload).toMatchObject({ status: 'failed', transaction_id: refundId, reason: 'BE08', reason_code: 'RETURN_DEADLINE_EXCEEDED', total_refunded: 0, remaining_refundable: 200_000, infraction_id: id });
  });
});

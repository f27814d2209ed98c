import type { PixDeps } from '../pix/deps.js';
import type { Sql } from '../db/db.js';
import { DomainError } from '../errors/catalog.js';
import { isoZ } from '../lib/clock.js';
import { emitMedEvent, infractionBody } from './events.js';
import * as repo from './repository.js';
import type { Attachment, InfractionRow } from './repository.js';

/**
 * The merchant's side of MED (docs/med.md): GET /med, GET /med/:id (payment:read) and
 * POST /med/:id/defense (payment:write). Scoped to the API key's account: an infraction of another
 * account or merchant is not found.
 */

/** The MED record, as GET /med, GET /med/:id, the defense answer and the sandbox show it. */
export function medRecord(i: InfractionRow) {
  return {
    id: i.id,
    status: i.status,
    reason: i.reason,
    account_id: i.account_id,
    transaction_id: i.original_transaction_id,
    end_to_end_id: i.end_to_end_id,
    original_amount: i.original_amount,
    amount: i.amount,
    blocked_amount: i.blocked_amount,
    refunded_amount: i.refunded_amount,
    released_amount: i.released_amount,
    payer: { name: i.payer_name, document: i.payer_document, ispb: i.payer_ispb, bank_name: i.payer_bank_name },
    decision: i.decision,
    refund: {
      status: i.refund_status,
      transaction_id: i.refund_transaction_id,
      end_to_end_id: i.refund_end_to_end_id,
      amount: i.refund_amount,
      completed_at: isoZ(i.refund_completed_at),
    },
    defense:
      i.defense_submitted_at === null
        ? null
        : { text: i.defense_text, attachments: i.defense_attachments ?? [], submitted_at: isoZ(i.defense_submitted_at) },
    defense_deadline: isoZ(i.defense_deadline),
    created_at: isoZ(i.created_at),
    updated_at: isoZ(i.updated_at),
    resolved_at: isoZ(i.resolved_at),
  };
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
const NOT_FOUND = 'Infraction not found';

/** The `:id` of a MED route: 400 `id must be a valid UUID` (the spec's example) unless it is one. */
export function infractionId(raw: string): string {
  if (!UUID.test(raw)) throw new DomainError('bad_request', { message: 'id must be a valid UUID' });
  return raw.toLowerCase();
}

/** The filters and page of GET /med (read from the query string by src/med/routes.ts). */
export interface InfractionListQuery {
  page: number;
  perPage: number;
  from: Date | undefined;
  before: Date | undefined;
  status: (typeof repo.MED_STATUSES)[number] | undefined;
  endToEndId: string | undefined;
}

/** GET /med: status, end_to_end_id, date_from, date_to, page, per_page; newest first. */
export async function listInfractions(ctx: Pick<PixDeps, 'db' | 'clock'>, accountId: number, query: InfractionListQuery) {
  const { page, perPage, from, before, status, endToEndId } = query;
  const rows = await repo.listForAccount(ctx.db, { accountId, status, endToEndId, from, before, limit: perPage, offset: (page - 1) * perPage });
  return { worked: true, data: rows.map(medRecord), page, per_page: perPage };
}

/** GET /med/:id. */
export async function getInfraction(ctx: Pick<PixDeps, 'db' | 'clock'>, accountId: number, id: string) {
  const row = await repo.findForAccount(ctx.db, accountId, infractionId(id));
  if (!row) throw new DomainError('not_found', { message: NOT_FOUND });
  return { worked: true, ...medRecord(row) };
}

export interface Defense {
  text: string;
  attachments: Attachment[];
}

export type RecordAnswer = (tx: Sql, statusCode: number, body: unknown) => Promise<void>;

/**
 * POST /med/:id/defense: stores the merchant's defense on an OPEN infraction before its deadline,
 * status `defense_submitted`, `pix.infraction.defense_submitted` — one transaction, with the
 * idempotency answer. 201 with the MED record. A second defense, a resolved infraction or a passed
 * deadline: 422.
 */
export async function submitDefense(ctx: Pick<PixDeps, 'db' | 'clock'>, accountId: number, id: string, defense: Defense, record: RecordAnswer) {
  const uuid = infractionId(id);
  return ctx.db.transaction(async (tx) => {
    const row = await repo.findForAccount(tx, accountId, uuid, true);
    if (!row) throw new DomainError('not_found', { message: NOT_FOUND });
    if (row.status !== 'OPEN') {
      throw new DomainError('unprocessable_entity', {
        message:
          row.status === 'defense_submitted'
            ? 'A defense was already submitted for this infraction'
            : `The infraction is ${row.status}; a defense can only be submitted while it is OPEN`,
      });
    }
    const now = ctx.clock.now();
    if (now.getTime() >= row.defense_deadline.getTime()) throw new DomainError('unprocessable_entity', { message: `The defense deadline passed at ${isoZ(row.defense_deadline)}` });
    await repo.updateInfraction(tx, row.id, { status: 'defense_submitted', defense: { ...defense, submittedAt: now } }, now);
    const updated = (await repo.findInfraction(tx, row.id))!;
    await emitMedEvent(tx, updated, 'pix.infraction.defense_submitted', {
      ...infractionBody(updated),
      defense: { text: defense.text, attachments: defense.attachments },
      defense_submitted_at: isoZ(now),
    });
    const body = { worked: true, ...medRecord(updated) };
    await record(tx, 201, body);
    return body;
  });
}

import { sqlState, UNIQUE_VIOLATION, type Sql } from '../../db/db.js';
import { DomainError, invalidFields } from '../../errors/catalog.js';
import { encodeBrCode } from '../../lib/brcode.js';
import { addDays, brasiliaDate, dayNumber } from '../../lib/businessDays.js';
import { findMerchant } from '../../merchants/repository.js';
import { cancelChargeInTx, CHARGE, openChargeInTx } from '../../pix/cashin/charges.js';
import { findCharge, setDueTerms } from '../../pix/cashin/repository.js';
import type { PixKeyRow } from '../../pix/ownKeys.js';
import { activeKey, dropUndefined, linkableLocation, refused, stateAtRevision, TXID } from '../chargeParts.js';
import { locationUrl, type LocationDeps } from '../locations.js';
import { payableWindow } from './amountDue.js';
import { cobvViolations, MAX_DAYS_AFTER_DUE } from './rules.js';
import * as loteStore from './loteStore.js';
import * as store from './store.js';
import type { CobvRequestFields, CobvRow, CobvState, CobvWrite } from './store.js';
import { cobvValueOf, type CobvCommand, type CobvPatch } from './types.js';

/**
 * Due-date charges of the standard (`cobv`), each a pixgate charge underneath
 * (src/pix/cashin/charges.ts: the pending statement record, `pix_charges`, events, the ledger
 * posting, MED when paid). The pixgate charge carries `due_terms` (what it asks on each day,
 * src/apiPix/cobv/amountDue.ts) and its deadline is the end (Brasília) of the last payable day. The
 * cobv keeps the receiver's txid (unique per account, and not a cob's), its revisions and its
 * location; its status is its charge's. A revision that changes what is paid (valor, calendario,
 * chave) cancels the charge underneath and opens a new one, as a cob's does.
 */
export type CobvDeps = LocationDeps;

export interface CobvOwner {
  merchantId: number;
  accountId: number;
}

/** Brasília midnight is 03:00 UTC. */
const BRASILIA_MIDNIGHT_UTC_MS = 3 * 3_600_000;




/** A cobv's BR Code: dynamic, no amount (it depends on the payment date; the payload gives it). */
function dynamicBrCode(host: string, token: string, merchantName: string): string {
  return encodeBrCode({ url: locationUrl(host, token, 'cobv'), merchantName: merchantName || CHARGE.fallbackMerchantName, merchantCity: CHARGE.merchantCity, singleUse: true });
}

/** The end of the last payable day in Brasília: the pixgate charge's deadline. */
export function deadlineOf(dueDate: string, daysAfterDue: number): Date {
  const { lastPayable } = payableWindow({ dueDate, daysAfterDue });
  return new Date(dayNumber(addDays(lastPayable, 1)) * 86_400_000 + BRASILIA_MIDNIGHT_UTC_MS);
}

function checked(c: CobvCommand, createdOn: string): void {
  if (c.daysAfterDue > MAX_DAYS_AFTER_DUE) throw refused('calendario.validadeAposVencimento', `no máximo ${MAX_DAYS_AFTER_DUE} dias`);
  const fields = cobvViolations(c, createdOn);
  if (Object.keys(fields).length > 0) throw invalidFields(fields);
}

/** The pixgate charge underneath a cobv's terms, opened in `tx` with its due terms. */
async function openUnderlying(tx: Sql, owner: CobvOwner, key: PixKeyRow, c: CobvCommand, merchantName: string, now: Date) {
  const deadline = deadlineOf(c.dueDate, c.daysAfterDue);
  const value = cobvValueOf(c.valor);
  const charge = await openChargeInTx(
    tx,
    owner,
    {
      amountCents: value.originalCents,
      expiresInSeconds: (deadline.getTime() - now.getTime()) / 1000,
      payerName: c.devedor.nome,
      payerDocument: c.devedor.cpf ?? c.devedor.cnpj,
      description: c.solicitacaoPagador,
      tag: undefined,
      externalId: undefined,
      pixKey: key.key,
    },
    key,
    merchantName,
    now,
  );
  await setDueTerms(tx, charge.id, { value, calendar: { dueDate: c.dueDate, daysAfterDue: c.daysAfterDue } });
  return charge;
}

function requestOf(c: CobvCommand): CobvRequestFields {
  return dropUndefined({ devedor: c.devedor, solicitacaoPagador: c.solicitacaoPagador, infoAdicionais: c.infoAdicionais });
}

function writeOf(c: CobvCommand, chargeId: string, locId: number | null, emv: string | null, loteId?: number | null): CobvWrite {
  return {
    chargeId,
    locId,
    loteId,
    chave: c.chave,
    originalCents: cobvValueOf(c.valor).originalCents,
    dueDate: c.dueDate,
    daysAfterDue: c.daysAfterDue,
    valor: c.valor,
    devedor: c.devedor,
    request: requestOf(c),
    emv,
  };
}

/**
 * PUT /cobv/{txid}: a new due-date charge, or — for a txid that names an ATIVA cobv — its
 * replacement as a new revision (refused when it is not ATIVA). `loteId`: created by a batch.
 */
export async function putCobv(deps: CobvDeps, owner: CobvOwner, txid: string, c: CobvCommand, loteId?: number): Promise<CobvRow> {
  if (!TXID.test(txid)) throw refused('txid', 'deve ter de 26 a 35 letras ou dígitos');
  if (loteId === undefined) {
    const item = await loteStore.itemOfTxid(deps.db, owner.accountId, txid);
    if (item && item.status !== 'CRIADA') throw refused('txid', `pertence ao lote ${item.lote_id}, onde está ${item.status}`);
  }
  const existing = await store.findCobv(deps.db, owner.accountId, txid);
  if (existing) return reviseCobv(deps, owner, txid, { ...c }, 'replace');
  if (await store.cobHoldsTxid(deps.db, owner.accountId, txid)) throw refused('txid', 'já identifica uma cobrança imediata (cob) deste recebedor');
  const now = deps.clock.now();
  checked(c, brasiliaDate(now));
  const key = await activeKey(deps.db, owner.accountId, c.chave);
  const merchantName = (await findMerchant(deps.db, owner.merchantId))?.name ?? '';
  try {
    await deps.db.transaction(async (tx) => {
      const loc = await linkableLocation(tx, owner.accountId, 'cobv', c.locId, null, now);
      const charge = await openUnderlying(tx, owner, key, c, merchantName, now);
      const id = await store.insertCobv(tx, owner.accountId, txid, writeOf(c, charge.id, loc.id, dynamicBrCode(deps.config.apiPixLocationHost, loc.token, merchantName), loteId), now);
      if (id === null) throw refused('txid', 'já está em uso por outra cobrança');
    });
  } catch (err) {
    if (sqlState(err) === UNIQUE_VIOLATION) throw refused(c.locId !== undefined ? 'loc.id' : 'txid', 'já está em uso por outra cobrança');
    throw err;
  }
  return (await store.findCobv(deps.db, owner.accountId, txid))!;
}

export function stateOf(row: CobvRow): CobvState {
  return {
    revisao: row.revisao,
    chave: row.chave,
    due_date: row.due_date,
    days_after_due: row.days_after_due,
    valor: row.valor,
    loc_id: row.loc_id,
    request: row.request,
    status: row.status,
    emv: row.emv,
  };
}

function commandOf(row: CobvRow): CobvCommand {
  return {
    dueDate: row.due_date,
    daysAfterDue: row.days_after_due,
    devedor: row.request.devedor,
    locId: row.loc_id ?? undefined,
    valor: row.valor,
    chave: row.chave,
    solicitacaoPagador: row.request.solicitacaoPagador,
    infoAdicionais: row.request.infoAdicionais,
  };
}

/**
 * PATCH /cobv/{txid} (`merge`: the fields present change) and a PUT over an existing txid
 * (`replace`: every field is the request's). Only an ATIVA cobv changes; removal
 * (`status: REMOVIDA_PELO_USUARIO_RECEBEDOR`) comes alone. Each revision adds 1 to `revisao`,
 * except one that only moves the charge to another location.
 */
export async function reviseCobv(deps: CobvDeps, owner: CobvOwner, txid: string, patch: CobvPatch, mode: 'merge' | 'replace' = 'merge'): Promise<CobvRow> {
  const current = await store.findCobv(deps.db, owner.accountId, txid);
  if (!current) throw new DomainError('not_found', { message: `Cobrança ${txid} não encontrada` });
  const merchantName = (await findMerchant(deps.db, owner.merchantId))?.name ?? '';
  await deps.db.transaction(async (tx) => {
    const row = await store.lockCobv(tx, owner.accountId, txid);
    if (!row) throw new DomainError('not_found', { message: `Cobrança ${txid} não encontrada` });
    if (row.status !== 'ATIVA') throw refused('status', `a cobrança está ${row.status} e não pode ser alterada`);
    const now = deps.clock.now();
    const charge = (await findCharge(tx, row.charge_id))!;
    if (patch.remove) {
      const others = Object.entries(patch).filter(([k, v]) => k !== 'remove' && v !== undefined);
      if (others.length > 0) throw refused('status', 'a remoção não pode vir com outras alterações');
      await cancelChargeInTx(tx, charge, now);
      await store.markRemoved(tx, row.id, stateOf(row), now);
      return;
    }
    const before = commandOf(row);
    const { remove: _remove, valorPatch, ...fields } = patch;
    const next: CobvCommand = mode === 'replace' ? { ...(fields as CobvCommand) } : { ...before, ...dropUndefined(fields) };
    if (valorPatch) next.valor = dropUndefined({ ...next.valor, ...valorPatch });
    if (mode === 'replace' && patch.locId === undefined) next.locId = before.locId;
    checked(next, brasiliaDate(row.created_at));
    let locId = row.loc_id;
    let locToken = row.loc_token;
    if (next.locId !== undefined && next.locId !== row.loc_id) {
      const loc = await linkableLocation(tx, owner.accountId, 'cobv', next.locId, txid, now);
      locId = loc.id;
      locToken = loc.token;
    }
    const moneyChanged =
      next.chave !== before.chave || next.dueDate !== before.dueDate || next.daysAfterDue !== before.daysAfterDue || JSON.stringify(next.valor) !== JSON.stringify(before.valor);
    const onlyLocation = !moneyChanged && JSON.stringify(requestOf(next)) === JSON.stringify(requestOf(before));
    let chargeId = row.charge_id;
    if (moneyChanged) {
      const key = await activeKey(tx, owner.accountId, next.chave);
      await cancelChargeInTx(tx, charge, now);
      chargeId = (await openUnderlying(tx, owner, key, next, merchantName, now)).id;
    }
    const emv = locToken === null ? null : dynamicBrCode(deps.config.apiPixLocationHost, locToken, merchantName);
    try {
      await store.reviseCobv(tx, row.id, writeOf(next, chargeId, locId, emv), stateOf(row), !onlyLocation, now);
    } catch (err) {
      if (sqlState(err) === UNIQUE_VIOLATION) throw refused('loc.id', 'a location referenciada já está sendo utilizada por outra cobrança');
      throw err;
    }
  });
  return (await store.findCobv(deps.db, owner.accountId, txid))!;
}

/** GET /cobv/{txid}: the cobv now, or as revision `revisao` left it (400 for one it never had). */
export async function getCobv(deps: CobvDeps, accountId: number, txid: string, revisao?: number): Promise<{ row: CobvRow; state: CobvState }> {
  const row = await store.findCobv(deps.db, accountId, txid);
  if (!row) throw new DomainError('not_found', { message: `Cobrança ${txid} não encontrada` });
  return { row, state: stateAtRevision(row, stateOf(row), revisao) };
}

export async function listCobvs(deps: CobvDeps, filter: store.CobvFilter) {
  return store.listCobvs(deps.db, filter);
}

/** The cobv a location URL shows (the payload read, the sandbox payer), if it is one of ours. */
export async function cobvOfLocationToken(deps: { db: Sql }, token: string): Promise<CobvRow | undefined> {
  return store.findCobvByLocationToken(deps.db, token);
}

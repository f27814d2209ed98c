import { sqlState, UNIQUE_VIOLATION, type Sql } from '../db/db.js';
import { DomainError } from '../errors/catalog.js';
import { encodeBrCode } from '../lib/brcode.js';
import { randomAlnum } from '../lib/ids.js';
import { findMerchant } from '../merchants/repository.js';
import { cancelChargeInTx, CHARGE, openChargeInTx } from '../pix/cashin/charges.js';
import { findCharge } from '../pix/cashin/repository.js';
import type { PixKeyRow } from '../pix/ownKeys.js';
import { activeKey, dropUndefined, linkableLocation, refused, stateAtRevision, TXID } from './chargeParts.js';
import * as store from './cobStore.js';
import type { CobRequestFields, CobRow, CobState } from './cobStore.js';
import { locationUrl, type LocationDeps } from './locations.js';
import { findById } from '../transactions/records.js';

/**
 * Charges of the standard (`cob`), each a pixgate charge underneath (src/pix/cashin/charges.ts:
 * the pending statement record, `pix_charges`, its events, expiry, the ledger posting and MED when
 * paid). The cob keeps the receiver's txid (unique per account), its revisions and the location;
 * its status is its charge's. A revision that changes what is paid (amount, key, expiry,
 * modalidadeAlteracao) cancels the charge underneath and opens a new one: a payment in flight for
 * the old one pays nothing (it is credited as a plain Pix) rather than the wrong amount.
 */
export type CobDeps = LocationDeps;

export interface CobOwner {
  merchantId: number;
  accountId: number;
}

/** A charge as the receiver asks for it (PUT/POST: whole; PATCH: the fields present change). */
export interface CobInput {
  chave: string;
  amountCents: number;
  modalidadeAlteracao: number;
  /** Seconds from creation; default 86400. */
  expiracao: number;
  locId: number | undefined;
  request: CobRequestFields;
}

export interface CobPatch {
  chave?: string;
  amountCents?: number;
  modalidadeAlteracao?: number;
  expiracao?: number;
  locId?: number;
  devedor?: CobRequestFields['devedor'];
  solicitacaoPagador?: string;
  infoAdicionais?: CobRequestFields['infoAdicionais'];
  remove?: boolean;
}

export const COB = {
  defaultExpiracao: 86_400,
  /** Length of the txids pixgate assigns (POST /cob): within the standard's 26 to 35. */
  pspTxidLength: 32,
} as const;





function dynamicBrCode(host: string, token: string, amountCents: number, modalidade: number, merchantName: string): string {
  return encodeBrCode({
    url: locationUrl(host, token),
    // A fixed amount is written in the code; one the payer may change is not.
    ...(modalidade === 0 ? { amountCents } : {}),
    merchantName: merchantName || CHARGE.fallbackMerchantName,
    merchantCity: CHARGE.merchantCity,
    singleUse: true,
  });
}

function documentOf(request: CobRequestFields): { cpf: string | null; cnpj: string | null; payerDocument: string | undefined } {
  const cpf = request.devedor?.cpf ?? null;
  const cnpj = request.devedor?.cnpj ?? null;
  const doc = cpf ?? cnpj;
  return { cpf, cnpj, payerDocument: doc !== null && /^\d+$/.test(doc) ? doc : undefined };
}

/** The pixgate charge underneath a cob's terms, opened in `tx`, payable until `deadline`. */
async function openUnderlying(tx: Sql, owner: CobOwner, key: PixKeyRow, terms: { amountCents: number; request: CobRequestFields }, merchantName: string, now: Date, deadline: Date) {
  const seconds = (deadline.getTime() - now.getTime()) / 1000;
  if (seconds <= 0) throw refused('calendario.expiracao', 'a expiração, contada da criação da cobrança, já passou');
  return openChargeInTx(
    tx,
    owner,
    {
      amountCents: terms.amountCents,
      expiresInSeconds: seconds,
      payerName: terms.request.devedor?.nome,
      payerDocument: documentOf(terms.request).payerDocument,
      description: terms.request.solicitacaoPagador,
      tag: undefined,
      externalId: undefined,
      pixKey: key.key,
    },
    key,
    merchantName,
    now,
  );
}

/**
 * PUT /cob/{txid} (`txid` given) and POST /cob (pixgate's txid). A PUT naming a charge that
 * exists replaces it as a new revision while it is ATIVA, and is refused otherwise.
 */
export async function createCob(deps: CobDeps, owner: CobOwner, txid: string | undefined, input: CobInput): Promise<CobRow> {
  const id = txid ?? randomAlnum(COB.pspTxidLength);
  if (!TXID.test(id)) throw refused('txid', 'deve ter de 26 a 35 letras ou dígitos');
  const existing = txid === undefined ? undefined : await store.findCob(deps.db, owner.accountId, id);
  if (existing) {
    return reviseCob(deps, owner, id, {
      chave: input.chave,
      amountCents: input.amountCents,
      modalidadeAlteracao: input.modalidadeAlteracao,
      expiracao: input.expiracao,
      ...(input.locId !== undefined ? { locId: input.locId } : {}),
      devedor: input.request.devedor,
      solicitacaoPagador: input.request.solicitacaoPagador,
      infoAdicionais: input.request.infoAdicionais,
    }, 'replace');
  }
  const key = await activeKey(deps.db, owner.accountId, input.chave);
  const merchantName = (await findMerchant(deps.db, owner.merchantId))?.name ?? '';
  try {
    await deps.db.transaction(async (tx) => {
      const now = deps.clock.now();
      const loc = await linkableLocation(tx, owner.accountId, 'cob', input.locId, null, now);
      const charge = await openUnderlying(tx, owner, key, input, merchantName, now, new Date(now.getTime() + input.expiracao * 1000));
      const doc = documentOf(input.request);
      await store.insertCob(tx, {
        accountId: owner.accountId,
        txid: id,
        chargeId: charge.id,
        locId: loc.id,
        chave: input.chave,
        amountCents: input.amountCents,
        modalidadeAlteracao: input.modalidadeAlteracao,
        expiracao: input.expiracao,
        devedorCpf: doc.cpf,
        devedorCnpj: doc.cnpj,
        request: input.request,
        emv: dynamicBrCode(deps.config.apiPixLocationHost, loc.token, input.amountCents, input.modalidadeAlteracao, merchantName),
        now,
      });
    });
  } catch (err) {
    // Another request created the same txid (or linked the same location) first.
    if (sqlState(err) === UNIQUE_VIOLATION) throw refused(input.locId !== undefined ? 'loc.id' : 'txid', 'já está em uso por outra cobrança');
    throw err;
  }
  return (await store.findCob(deps.db, owner.accountId, id))!;
}

function stateOf(row: CobRow): CobState {
  return {
    revisao: row.revisao,
    chave: row.chave,
    amount_cents: row.amount_cents,
    modalidade_alteracao: row.modalidade_alteracao,
    expiracao: row.expiracao,
    loc_id: row.loc_id,
    request: row.request,
    status: row.status,
    emv: row.emv,
  };
}

/**
 * PATCH /cob/{txid} (`merge`: the fields present change) and a PUT over an existing txid
 * (`replace`: the request fields absent are cleared). Only an ATIVA charge changes; removal
 * (`status: REMOVIDA_PELO_USUARIO_RECEBEDOR`) comes alone. Each revision adds 1 to `revisao`.
 */
export async function reviseCob(deps: CobDeps, owner: CobOwner, txid: string, patch: CobPatch, mode: 'merge' | 'replace' = 'merge'): Promise<CobRow> {
  const current = await store.findCob(deps.db, owner.accountId, txid);
  if (!current) throw new DomainError('not_found', { message: `Cobrança ${txid} não encontrada` });
  // Nothing to change: the charge as it is, no new revision.
  if (Object.values(patch).every((v) => v === undefined)) return current;
  const key = patch.chave !== undefined && patch.chave !== current.chave ? await activeKey(deps.db, owner.accountId, patch.chave) : undefined;
  const merchantName = (await findMerchant(deps.db, owner.merchantId))?.name ?? '';
  await deps.db.transaction(async (tx) => {
    const row = await store.lockCob(tx, owner.accountId, txid);
    if (!row) throw new DomainError('not_found', { message: `Cobrança ${txid} não encontrada` });
    if (row.status !== 'ATIVA') throw refused('status', `a cobrança está ${row.status} e não pode ser alterada`);
    const now = deps.clock.now();
    const charge = (await findCharge(tx, row.charge_id))!;
    if (patch.remove) {
      const others = Object.entries(patch).filter(([k, v]) => k !== 'remove' && v !== undefined);
      if (others.length > 0) throw refused('status', 'a remoção não pode vir com outras alterações');
      await cancelChargeInTx(tx, charge, now);
      await store.reviseCob(tx, row.id, { ...updateOf(row, row.request), previous: stateOf(row), now });
      return;
    }
    const request: CobRequestFields =
      mode === 'replace'
        ? dropUndefined({ devedor: patch.devedor, solicitacaoPagador: patch.solicitacaoPagador, infoAdicionais: patch.infoAdicionais })
        : dropUndefined({ ...row.request, ...dropUndefined({ devedor: patch.devedor, solicitacaoPagador: patch.solicitacaoPagador, infoAdicionais: patch.infoAdicionais }) });
    const next = {
      chave: patch.chave ?? row.chave,
      amountCents: patch.amountCents ?? row.amount_cents,
      modalidadeAlteracao: patch.modalidadeAlteracao ?? row.modalidade_alteracao,
      expiracao: patch.expiracao ?? row.expiracao,
    };
    let locId = row.loc_id;
    let locToken = row.loc_token;
    if (patch.locId !== undefined && patch.locId !== row.loc_id) {
      const loc = await linkableLocation(tx, owner.accountId, 'cob', patch.locId, txid, now);
      locId = loc.id;
      locToken = loc.token;
    }
    const moneyChanged =
      next.chave !== row.chave || next.amountCents !== row.amount_cents || next.modalidadeAlteracao !== row.modalidade_alteracao || next.expiracao !== row.expiracao;
    let chargeId = row.charge_id;
    if (moneyChanged) {
      const payTo = key ?? (await activeKey(tx, owner.accountId, next.chave));
      await cancelChargeInTx(tx, charge, now);
      const opened = await openUnderlying(tx, owner, payTo, { amountCents: next.amountCents, request }, merchantName, now, new Date(row.created_at.getTime() + next.expiracao * 1000));
      chargeId = opened.id;
    }
    const doc = documentOf(request);
    try {
      await store.reviseCob(tx, row.id, {
        chargeId,
        locId,
        chave: next.chave,
        amountCents: next.amountCents,
        modalidadeAlteracao: next.modalidadeAlteracao,
        expiracao: next.expiracao,
        devedorCpf: doc.cpf,
        devedorCnpj: doc.cnpj,
        request,
        emv: locToken === null ? null : dynamicBrCode(deps.config.apiPixLocationHost, locToken, next.amountCents, next.modalidadeAlteracao, merchantName),
        previous: stateOf(row),
        now,
      });
    } catch (err) {
      if (sqlState(err) === UNIQUE_VIOLATION) throw refused('loc.id', 'a location referenciada já está sendo utilizada por outra cobrança');
      throw err;
    }
  });
  return (await store.findCob(deps.db, owner.accountId, txid))!;
}

function updateOf(row: CobRow, request: CobRequestFields) {
  return {
    chargeId: row.charge_id,
    locId: row.loc_id,
    chave: row.chave,
    amountCents: row.amount_cents,
    modalidadeAlteracao: row.modalidade_alteracao,
    expiracao: row.expiracao,
    devedorCpf: row.devedor_cpf,
    devedorCnpj: row.devedor_cnpj,
    request,
    emv: row.emv,
  };
}

/** GET /cob/{txid}: the charge now, or as revision `revisao` left it (400 for one it never had). */
export async function getCob(deps: CobDeps, accountId: number, txid: string, revisao?: number): Promise<{ row: CobRow; state: CobState }> {
  const row = await store.findCob(deps.db, accountId, txid);
  if (!row) throw new DomainError('not_found', { message: `Cobrança ${txid} não encontrada` });
  return { row, state: stateAtRevision(row, stateOf(row), revisao) };
}

export async function listCobs(deps: CobDeps, filter: store.CobFilter) {
  return store.listCobs(deps.db, filter);
}

/** The charge a location URL shows (the sandbox payer reading a dynamic BR Code), if it is one of ours. */
export async function cobOfLocationToken(deps: { db: Sql }, token: string): Promise<CobRow | undefined> {
  return store.findCobByLocationToken(deps.db, token);
}

/** The Pix that paid a cob (CONCLUIDA), as its pixgate charge's completed record shows it. */
export interface CobPayment {
  endToEndId: string;
  amountCents: number;
  at: Date;
}

export async function paymentOfCob(sql: Sql, row: CobRow): Promise<CobPayment | undefined> {
  if (row.status !== 'CONCLUIDA') return undefined;
  const record = await findById(sql, row.charge_id);
  if (!record || !record.end_to_end_id) return undefined;
  // The record states base units (cents × 100): whole cents, divided exactly.
  return { endToEndId: record.end_to_end_id, amountCents: Math.trunc(record.amount / 100), at: record.completed_at ?? row.paid_at ?? row.updated_at };
}

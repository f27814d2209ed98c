import type { Database, Sql } from '../db/db.js';
import { DomainError, invalidFields } from '../errors/catalog.js';
import { INSTITUTION_BOOK, post } from '../ledger/ledger.js';
import type { Clock } from '../lib/clock.js';
import { centsToBaseUnits } from '../lib/money.js';
import { addDays, barcodeToLinhaDigitavel, buildBarcode, formatLinhaDigitavel, MAX_DAYS_AHEAD } from './barcode.js';
import * as repo from './repository.js';
import type { CreateBoletoInput, PatchBoletoInput } from './schemas.js';

/** The caller of the boleto central API: an active central key. */
export interface CentralCaller {
  id: number;
  name: string;
  /** The beneficiary account of the key's boletos issued with this institution's ISPB. */
  accountId: number | null;
}

/** What the boleto functions use (AppContext has it). */
export interface BoletoDeps {
  db: Database;
  clock: Clock;
  config: { institutionIspb: string };
}
type Deps = BoletoDeps;

/**
 * COMPE bank code printed in pixgate's barcodes. pixgate is a simulated institution without a
 * COMPE code of its own; 999 is not assigned to any bank.
 */
export const BANK_CODE = '999';

/** Brazil has kept UTC−3 all year since 2019; calendar dates (due dates, "today") are Brasília's. */
const BRASILIA_OFFSET_MS = -3 * 3_600_000;

export function brasiliaToday(now: Date): string {
  return new Date(now.getTime() + BRASILIA_OFFSET_MS).toISOString().slice(0, 10);
}

/**
 * The barcode's free field (25 digits): the agreement code ("convênio", the central key's number,
 * 8 digits) followed by the nosso_numero zero-padded to 17 digits. Unique per boleto.
 */
export function freeField(centralKeyId: number, nossoNumero: string): string {
  const convenio = String(centralKeyId);
  if (convenio.length > 8) throw new RangeError(`central key ${centralKeyId} does not fit the 8-digit agreement code`);
  return convenio.padStart(8, '0') + nossoNumero.padStart(17, '0');
}

function codes(centralKeyId: number, nossoNumero: string, amountCents: number, dueDate: string) {
  const barcode = buildBarcode({ bankCode: BANK_CODE, dueDate, amountCents, freeField: freeField(centralKeyId, nossoNumero) });
  return { barcode, linha_digitavel: barcodeToLinhaDigitavel(barcode) };
}

/** A due date must be payable: from today to FEBRABAN's 5,500 days ahead (Brasília calendar). */
function checkDueDate(dueDate: string, now: Date) {
  const today = brasiliaToday(now);
  const last = addDays(today, MAX_DAYS_AHEAD);
  if (dueDate < today || dueDate > last) {
    throw invalidFields({ 'boleto.due_date': [`must be between ${today} and ${last}`] });
  }
}

export async function createBoleto(deps: Deps, caller: CentralCaller, input: CreateBoletoInput): Promise<repo.BoletoRow> {
  const now = deps.clock.now();
  checkDueDate(input.due_date, now);
  let beneficiaryAccountId: number | null = null;
  if (input.beneficiary_ispb === deps.config.institutionIspb) {
    if (caller.accountId === null) {
      throw new DomainError('beneficiary_account_required', { extra: { beneficiary_ispb: input.beneficiary_ispb } });
    }
    beneficiaryAccountId = caller.accountId;
  }
  const row = await repo.insertBoleto(deps.db, {
    central_key_id: caller.id,
    ...input,
    beneficiary_account_id: beneficiaryAccountId,
    ...codes(caller.id, input.nosso_numero, input.amount_cents, input.due_date),
    created_at: now,
  });
  if (!row) {
    throw new DomainError('boleto_already_exists', {
      message: `A boleto with nosso_numero ${input.nosso_numero} already exists`,
      extra: { nosso_numero: input.nosso_numero },
    });
  }
  return row;
}

export async function getBoleto(deps: Deps, caller: CentralCaller, nossoNumero: string): Promise<repo.BoletoRow> {
  const row = await repo.findBoleto(deps.db, caller.id, nossoNumero);
  if (!row) throw new DomainError('not_found', { message: 'Boleto not found' });
  return row;
}

export function listBoletos(deps: Deps, caller: CentralCaller, filter: repo.BoletoFilter): Promise<repo.BoletoRow[]> {
  return repo.listBoletos(deps.db, caller.id, filter);
}

/** Runs `fn` on the caller's boleto under its row lock; 404 when there is none. */
function withLockedBoleto<T>(
  deps: Deps,
  caller: CentralCaller,
  nossoNumero: string,
  fn: (tx: Sql, boleto: repo.BoletoRow, now: Date) => Promise<T>,
): Promise<T> {
  return deps.db.transaction(async (tx) => {
    const boleto = await repo.findBoleto(tx, caller.id, nossoNumero, true);
    if (!boleto) throw new DomainError('not_found', { message: 'Boleto not found' });
    return fn(tx, boleto, deps.clock.now());
  });
}

/** New amount and/or due date, while the boleto is registered (before payment). */
export function updateBoleto(deps: Deps, caller: CentralCaller, nossoNumero: string, patch: PatchBoletoInput): Promise<repo.BoletoRow> {
  return withLockedBoleto(deps, caller, nossoNumero, async (tx, boleto, now) => {
    if (boleto.status !== 'registered') {
      throw new DomainError('boleto_not_modifiable', { message: `A ${boleto.status} boleto cannot be changed`, extra: { status: boleto.status } });
    }
    if (patch.due_date !== undefined) checkDueDate(patch.due_date, now);
    const amountCents = patch.amount_cents ?? boleto.amount_cents;
    const dueDate = patch.due_date ?? boleto.due_date;
    return repo.updateBoletoTerms(tx, boleto.id, {
      amount_cents: amountCents,
      due_date: dueDate,
      ...codes(caller.id, boleto.nosso_numero, amountCents, dueDate),
      updated_at: now,
    });
  });
}

/** registered → cancelled. Cancelling a cancelled boleto answers it again; a paid one cannot be. */
export function cancelBoleto(deps: Deps, caller: CentralCaller, nossoNumero: string): Promise<repo.BoletoRow> {
  return withLockedBoleto(deps, caller, nossoNumero, async (tx, boleto, now) => {
    if (boleto.status === 'cancelled') return boleto;
    if (boleto.status !== 'registered') {
      throw new DomainError('boleto_not_cancellable', { message: `A ${boleto.status} boleto cannot be cancelled`, extra: { status: boleto.status } });
    }
    return repo.setStatusFromRegistered(tx, boleto.id, 'cancelled', now);
  });
}

/**
 * Records the payment of a registered boleto: the money arrives through the central bank and waits
 * in the clearing book until settlement. Idempotent: paying a paid (or settled) boleto records
 * nothing and answers its current state. `amountCents`, when given, must be the boleto's amount.
 */
export function payBoleto(deps: Deps, caller: CentralCaller, nossoNumero: string, amountCents?: number): Promise<repo.BoletoRow> {
  return withLockedBoleto(deps, caller, nossoNumero, async (tx, boleto, now) => {
    if (amountCents !== undefined && amountCents !== boleto.amount_cents) {
      throw new DomainError('boleto_payment_mismatch', { extra: { amount_cents: boleto.amount_cents } });
    }
    if (boleto.status === 'paid' || boleto.status === 'settled') return boleto;
    if (boleto.status === 'cancelled') {
      throw new DomainError('boleto_not_payable', { message: 'A cancelled boleto cannot be paid', extra: { status: boleto.status } });
    }
    const paid = await repo.setStatusFromRegistered(tx, boleto.id, 'paid', now);
    const amount = centsToBaseUnits(boleto.amount_cents);
    await post(tx, {
      kind: 'boleto_payment',
      reference: `boleto:${boleto.id}`,
      postings: [
        { book: INSTITUTION_BOOK.centralBank, amount: -amount },
        { book: INSTITUTION_BOOK.boletoClearing, amount },
      ],
    });
    return paid;
  });
}

const iso = (d: Date | null) => (d ? d.toISOString() : null);

/** A boleto as the API shows it. */
export function boletoView(b: repo.BoletoRow) {
  return {
    nosso_numero: b.nosso_numero,
    status: b.status,
    amount_cents: b.amount_cents,
    due_date: b.due_date,
    payer_document: b.payer_document,
    payer_name: b.payer_name,
    beneficiary_ispb: b.beneficiary_ispb,
    beneficiary_name: b.beneficiary_name,
    beneficiary_account_id: b.beneficiary_account_id,
    barcode: b.barcode,
    linha_digitavel: b.linha_digitavel,
    linha_digitavel_formatted: formatLinhaDigitavel(b.linha_digitavel),
    paid_at: iso(b.paid_at),
    cancelled_at: iso(b.cancelled_at),
    settlement_id: b.settlement_id,
    settled_at: iso(b.settled_at),
    created_at: b.created_at.toISOString(),
    updated_at: b.updated_at.toISOString(),
  };
}

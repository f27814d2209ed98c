import type { AppContext } from '../context.js';
import { badRequest, conflict, unprocessable } from '../http/errors.js';
import { BrCodeError, decodeBrCode, type DecodedBrCode } from '../lib/brcode.js';
import { cobOfLocationToken } from '../apiPix/cobs.js';
import { cobvOfLocationToken } from '../apiPix/cobv/cobvs.js';
import { expectedAmount } from '../pix/cashin/charges.js';
import { tokenOfLocationUrl } from '../apiPix/locations.js';
import { isoZ } from '../lib/clock.js';
import { centsToBaseUnits } from '../lib/money.js';
import * as charges from '../pix/cashin/repository.js';
import { brCodeKey } from '../pix/keys.js';
import type { SimulatedRail } from '../rail/sim/simulatedRail.js';
import { creditedOrRefused } from './outcome.js';

export interface PayBrCode {
  emv: string;
  /** Cents; only needed when the BR Code carries no amount (must match it otherwise). */
  amountCents: number | undefined;
  payerName: string | undefined;
  payerDocument: string | undefined;
  payerIspb: string | undefined;
  /** Pay only a code of this account (the portal's sandbox panel); a code of another is refused (422). */
  onlyAccountId?: number;
}

/**
 * POST /api/sandbox/pix/pay: the sandbox plays the payer's bank. Like a payer's app it reads the BR
 * Code (structure and CRC), resolves its key in the directory and refuses what an app refuses
 * before any money moves (all 4xx in the business shape, nothing written):
 *
 *   422  the payload is not a valid BR Code, or a dynamic one whose location this institution does not
 *        serve (a dynamic code of the API Pix façade is read at its location); its key is malformed,
 *        not in the directory, or a key of another institution (the sandbox pays this institution's
 *        accounts only); `amount` differs from the code's fixed amount
 *   400  the code has no amount and `amount` is missing
 *   409  the code names a charge of that account that is already paid, expired (also past its
 *        deadline but not yet swept) or cancelled — what a payer's bank reading the charge sees
 *
 * Then it sends the payment through the rail, carrying the code's txid; the service credits it
 * (docs/cash-in.md, "Paying a charge"). A code with no txid, or a txid that names no open charge of
 * that account, is credited as a plain PIX to the key. A payment the account cannot take (past its
 * maximum balance) is refused back to the payer: 422 (`creditedOrRefused`), the charge stays open.
 */
export async function payBrCode(ctx: AppContext, sim: SimulatedRail, input: PayBrCode) {
  let decoded: DecodedBrCode;
  try {
    decoded = decodeBrCode(input.emv);
  } catch (err) {
    if (err instanceof BrCodeError) throw unprocessable(`Invalid EMV payload: ${err.message}`);
    throw err;
  }
  // A dynamic code (the API Pix façade's cob): the payer's bank reads the location it points at
  // and pays the charge shown there — its key, amount and txid (src/apiPix/cobs.ts).
  if (decoded.key === null) {
    const shown = await readLocation(ctx, decoded.url ?? '');
    decoded = { ...decoded, key: shown.key, txid: shown.txid, amountCents: shown.amountCents };
  }
  const key = brCodeKey(decoded.key!);
  if (key === null) throw unprocessable('Invalid PIX key format');
  const entry = await ctx.rail.directory.lookupKey(key.key);
  if (!entry) throw unprocessable('The PIX key of the BR Code is not registered in the directory');
  if (entry.accountId === null) {
    throw unprocessable(`The PIX key of the BR Code belongs to another institution (ISPB ${entry.ispb}); the sandbox pays accounts of this institution only`);
  }
  if (input.onlyAccountId !== undefined && entry.accountId !== input.onlyAccountId) {
    throw unprocessable('The BR Code is not one of this account’s: the sandbox panel pays this account’s own charges and keys only');
  }

  let amountCents = decoded.amountCents;
  if (amountCents === null) {
    if (input.amountCents === undefined) throw badRequest({ amount: ['is required when the BR Code has no amount'] });
    amountCents = input.amountCents;
  } else if (input.amountCents !== undefined && input.amountCents !== amountCents) {
    throw unprocessable(`amount differs from the amount of the BR Code (${amountCents} cents)`);
  }

  const charge = decoded.txid === null ? undefined : await charges.findChargeByTxid(ctx.db, decoded.txid);
  const ours = charge !== undefined && charge.account_id === entry.accountId ? charge : undefined;
  if (ours) {
    if (ours.status === 'paid') throw conflict(`The charge ${ours.transaction_id} was already paid at ${isoZ(ours.paid_at)}`);
    if (ours.status === 'cancelled') throw conflict(`The charge ${ours.transaction_id} was cancelled`);
    if (ours.status === 'expired' || ctx.clock.now().getTime() >= ours.expires_at.getTime()) {
      throw conflict(`The charge ${ours.transaction_id} expired at ${isoZ(ours.expires_at)}`);
    }
  }

  const endToEndId = await sim.simulateInboundPayment({
    accountId: entry.accountId,
    amount: centsToBaseUnits(amountCents),
    payerName: input.payerName,
    payerDocument: input.payerDocument,
    payerIspb: input.payerIspb,
    txid: decoded.txid ?? undefined,
  });
  const row = await creditedOrRefused(ctx, endToEndId);
  const after = ours ? await charges.findCharge(ctx.db, ours.id) : undefined;
  return {
    transaction_id: row.transaction_id,
    end_to_end_id: endToEndId,
    amount: row.amount,
    fee_amount: row.fee_amount,
    net_amount: row.amount - row.fee_amount,
    txid: decoded.txid,
    charge: after ? { transaction_id: after.transaction_id, status: after.status } : null,
    payer: { name: row.counterparty_name, document: row.payer_document, ispb: row.payer_ispb, bank_name: row.payer_bank_name },
  };
}

/**
 * What a dynamic BR Code's location shows, as a payer's bank reads it: the charge's key, amount
 * (none when the payer may change it) and the txid its payment carries. A location this
 * institution does not serve, or that shows no charge, is refused (422); a charge no longer ATIVA
 * cannot be paid (409).
 */
async function readLocation(ctx: AppContext, url: string) {
  const token = tokenOfLocationUrl(url);
  const cob = token === null ? undefined : await cobOfLocationToken(ctx, token);
  if (!cob && token !== null) {
    // A due-date charge (cobv): the amount the location shows is the amount due today.
    const cobv = await cobvOfLocationToken(ctx, token);
    if (cobv) {
      if (cobv.status !== 'ATIVA') throw conflict(`The charge ${cobv.txid} is ${cobv.status}`);
      const charge = (await charges.findCharge(ctx.db, cobv.charge_id))!;
      return { key: charge.pix_key, txid: cobv.charge_txid, amountCents: expectedAmount(charge, ctx.clock.now()) / 100 };
    }
  }
  if (!cob) throw unprocessable('Invalid EMV payload: the location of this dynamic BR Code shows no charge of this institution');
  if (cob.status !== 'ATIVA') throw conflict(`The charge ${cob.txid} is ${cob.status}`);
  const charge = await charges.findCharge(ctx.db, cob.charge_id);
  return { key: charge!.pix_key, txid: cob.charge_txid, amountCents: cob.modalidade_alteracao === 0 ? cob.amount_cents : null };
}

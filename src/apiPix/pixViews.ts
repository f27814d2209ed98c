import { BASE_UNITS_PER_CENT } from '../lib/money.js';
import { centsToDecimal, decimalToCents } from './amount.js';

/**
 * How pixgate's records of received Pix and of their returns read in the API Pix standard's words
 * (docs/api-pix.md, "Received Pix, returns and webhooks"): amounts as decimal strings of reais,
 * instants in RFC 3339 with Z, a return's status and nature from the refund record it is.
 */

/** Base units (cents × 100) as the standard's `valor`: "12.34" (src/apiPix/amount.ts, no floating point). */
export function valorOf(baseUnits: number): string {
  return centsToDecimal(Math.trunc(baseUnits / BASE_UNITS_PER_CENT));
}

/** The standard's `valor` ("12.34", 1 to 10 digits before the point) as cents; null when malformed. */
export function centsOfValor(valor: unknown): number | null {
  return typeof valor === 'string' ? decimalToCents(valor) : null;
}

/** The return code a nature of return travels with in the pacs.004, and back. */
export const NATUREZA_CODE = { ORIGINAL: 'MD06', RETIRADA: 'SL02' } as const;
export type Natureza = keyof typeof NATUREZA_CODE;
const CODE_NATUREZA: Record<string, string> = { MD06: 'ORIGINAL', SL02: 'RETIRADA', BE08: 'MED_OPERACIONAL', FR01: 'MED_FRAUDE' };

/** A refund record (voluntary or MED) with the client's id of it, when it was asked through API Pix. */
export interface ReturnRecord {
  transaction_id: string;
  end_to_end_id: string | null;
  amount: number;
  status: number;
  return_code: string | null;
  description: string;
  reason: string | null;
  created_at: Date;
  completed_at: Date | null;
  return_id: string | null;
}

const STATUS = { 1: 'DEVOLVIDO', 2: 'EM_PROCESSAMENTO' } as Record<number, string>;

/** A return as the standard's `Devolucao`. A return not asked through API Pix is named by its transaction_id. */
export function devolucaoView(r: ReturnRecord) {
  const status = STATUS[r.status] ?? 'NAO_REALIZADO';
  const natureza = r.return_code ? CODE_NATUREZA[r.return_code] : undefined;
  return {
    id: r.return_id ?? r.transaction_id,
    rtrId: r.end_to_end_id!,
    valor: valorOf(r.amount),
    ...(natureza ? { natureza } : {}),
    ...(r.description ? { descricao: r.description.slice(0, 140) } : {}),
    horario: {
      solicitacao: r.created_at.toISOString(),
      ...(status === 'DEVOLVIDO' && r.completed_at ? { liquidacao: r.completed_at.toISOString() } : {}),
    },
    status,
    ...(status === 'NAO_REALIZADO' && r.reason ? { motivo: r.reason.slice(0, 140) } : {}),
  };
}

/** A received Pix (statement record, its charge's txid and key) with its returns. */
export interface ReceivedRecord {
  id: string;
  end_to_end_id: string;
  amount: number;
  txid: string | null;
  chave: string | null;
  info_pagador: string | null;
  completed_at: Date | null;
  created_at: Date;
}

/** A received Pix as the standard's `Pix`. */
export function pixView(p: ReceivedRecord, returns: readonly ReturnRecord[]) {
  return {
    endToEndId: p.end_to_end_id,
    ...(p.txid ? { txid: p.txid } : {}),
    valor: valorOf(p.amount),
    ...(p.chave ? { chave: p.chave } : {}),
    horario: (p.completed_at ?? p.created_at).toISOString(),
    ...(p.info_pagador ? { infoPagador: p.info_pagador.slice(0, 140) } : {}),
    ...(returns.length > 0 ? { devolucoes: returns.map(devolucaoView) } : {}),
  };
}

export type PixView = ReturnType<typeof pixView>;
export type DevolucaoView = ReturnType<typeof devolucaoView>;

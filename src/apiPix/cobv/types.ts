import { decimalToCents } from '../amount.js';
import type { CobvValue } from './amountDue.js';

/** The standard's `valor` of a cobv as the receiver sent it (amounts and percentages as decimal strings). */
export interface CobvValueText {
  original: string;
  multa?: { modalidade: number; valorPerc: string };
  juros?: { modalidade: number; valorPerc: string };
  abatimento?: { modalidade: number; valorPerc: string };
  desconto?: { modalidade: number; descontoDataFixa?: Array<{ data: string; valorPerc: string }>; valorPerc?: string };
}

/** A validated PUT /cobv/{txid} (and each item of a lotecobv). */
export interface CobvCommand {
  dueDate: string;
  daysAfterDue: number;
  devedor: { cpf?: string; cnpj?: string; nome: string; email?: string; logradouro?: string; cidade?: string; uf?: string; cep?: string };
  locId: number | undefined;
  valor: CobvValueText;
  chave: string;
  solicitacaoPagador: string | undefined;
  infoAdicionais: Array<{ nome: string; valor: string }> | undefined;
}

/** A validated PATCH /cobv/{txid}: only what was sent; `remove` is `status: REMOVIDA_PELO_USUARIO_RECEBEDOR`. */
export type CobvPatch = Partial<Omit<CobvCommand, 'locId'>> & { locId?: number; remove?: boolean; valorPatch?: Partial<CobvValueText> };

/** Integer of a decimal string already validated by the edge ("2.50" → 250). */
function units(text: string): number {
  const n = decimalToCents(text);
  if (n === null) throw new Error(`not a decimal amount: ${text}`);
  return n;
}

/** The cents (and hundredths of a percent) of a `valor` (src/apiPix/cobv/amountDue.ts). */
export function cobvValueOf(v: CobvValueText): CobvValue {
  const out: CobvValue = { originalCents: units(v.original) };
  if (v.abatimento) out.abatimento = { modalidade: v.abatimento.modalidade as 1 | 2, value: units(v.abatimento.valorPerc) };
  if (v.multa) out.multa = { modalidade: v.multa.modalidade as 1 | 2, value: units(v.multa.valorPerc) };
  if (v.juros) out.juros = { modalidade: v.juros.modalidade as 1 | 2 | 3 | 4 | 5 | 6 | 7 | 8, value: units(v.juros.valorPerc) };
  const d = v.desconto;
  if (d) {
    if (d.modalidade === 1 || d.modalidade === 2) out.desconto = { modalidade: d.modalidade, dates: (d.descontoDataFixa ?? []).map((x) => ({ date: x.data, value: units(x.valorPerc) })) };
    else out.desconto = { modalidade: d.modalidade as 3 | 4 | 5 | 6, value: units(d.valorPerc!) };
  }
  return out;
}

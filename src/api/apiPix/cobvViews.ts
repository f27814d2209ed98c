import { centsToDecimal } from '../../apiPix/amount.js';
import { amountDue } from '../../apiPix/cobv/amountDue.js';
import type { CobvRow, CobvState } from '../../apiPix/cobv/store.js';
import { cobvValueOf } from '../../apiPix/cobv/types.js';
import { locationUrl } from '../../apiPix/locations.js';
import { brasiliaDate } from '../../lib/businessDays.js';
import { isoZ } from '../../lib/clock.js';
import { CHARGE } from '../../pix/cashin/charges.js';

/** The receiver of a cobv: the merchant (pixgate keeps no street address; see docs/api-pix.md, "cobv"). */
export interface Receiver {
  name: string;
  document: string;
}

export function recebedorOf(r: Receiver) {
  return {
    nome: r.name,
    ...(r.document.length === 11 ? { cpf: r.document } : { cnpj: r.document }),
    logradouro: '',
    cidade: CHARGE.merchantCity,
    uf: 'SP',
    cep: '',
  };
}

/** The Pix that paid a CONCLUIDA cobv, with the parts of its amount on the day it was paid. */
function pixOf(row: CobvRow, state: CobvState) {
  if (row.status !== 'CONCLUIDA' || row.end_to_end_id === null || row.paid_amount === null || row.paid_at === null) return undefined;
  const due = amountDue(cobvValueOf(state.valor), { dueDate: state.due_date, daysAfterDue: state.days_after_due }, brasiliaDate(row.paid_at));
  const part = (cents: number) => (cents > 0 ? { valor: centsToDecimal(cents) } : undefined);
  const componentesValor = {
    original: { valor: centsToDecimal(due.originalCents) },
    ...(part(due.multaCents) ? { multa: part(due.multaCents) } : {}),
    ...(part(due.jurosCents) ? { juros: part(due.jurosCents) } : {}),
    ...(part(due.abatimentoCents) ? { abatimento: part(due.abatimentoCents) } : {}),
    ...(part(due.descontoCents) ? { desconto: part(due.descontoCents) } : {}),
  };
  // The record states base units (cents × 100): whole cents, divided exactly.
  return [{ endToEndId: row.end_to_end_id, txid: row.txid, valor: centsToDecimal(Math.trunc(row.paid_amount / 100)), chave: state.chave, horario: isoZ(row.paid_at)!, componentesValor }];
}

/** A cobv as revision `state` shows it (the current one: the row's), with its Pix when paid. */
export function cobvView(host: string, row: CobvRow, state: CobvState, receiver: Receiver) {
  const linked = state.loc_id !== null && state.loc_id === row.loc_id && row.loc_token !== null;
  const location = linked ? locationUrl(host, row.loc_token!, 'cobv') : undefined;
  const r = state.request;
  const pix = state.revisao === row.revisao ? pixOf(row, state) : undefined;
  return {
    calendario: { criacao: isoZ(row.created_at)!, dataDeVencimento: state.due_date, validadeAposVencimento: state.days_after_due },
    txid: row.txid,
    revisao: state.revisao,
    ...(linked ? { loc: { id: row.loc_id!, txid: row.txid, location: location!, tipoCob: row.loc_tipo_cob!, criacao: isoZ(row.loc_created_at)! } } : {}),
    ...(location ? { location } : {}),
    status: state.status,
    devedor: r.devedor,
    recebedor: recebedorOf(receiver),
    valor: state.valor,
    chave: state.chave,
    ...(r.solicitacaoPagador !== undefined ? { solicitacaoPagador: r.solicitacaoPagador } : {}),
    ...(r.infoAdicionais !== undefined ? { infoAdicionais: r.infoAdicionais } : {}),
    ...(state.emv !== null && linked ? { pixCopiaECola: state.emv } : {}),
    ...(pix ? { pix } : {}),
  };
}

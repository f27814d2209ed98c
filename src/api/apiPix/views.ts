import { centsToDecimal } from '../../apiPix/amount.js';
import type { CobRow, CobState } from '../../apiPix/cobStore.js';
import type { CobPayment } from '../../apiPix/cobs.js';
import { locationUrl } from '../../apiPix/locations.js';
import type { LocationRow } from '../../apiPix/locationStore.js';
import { isoZ } from '../../lib/clock.js';

/** The façade's answers in the standard's words, from pixgate's rows (amounts as decimal strings). */

export function locationView(host: string, loc: LocationRow, withTxid = true) {
  return {
    id: loc.id,
    ...(withTxid && loc.txid !== null ? { txid: loc.txid } : {}),
    location: locationUrl(host, loc.token, loc.tipo_cob),
    tipoCob: loc.tipo_cob,
    criacao: isoZ(loc.created_at)!,
  };
}

/** A cob as revision `state` shows it (the current one: the row's), with its Pix when paid. */
export function cobView(host: string, row: CobRow, state: CobState, payment: CobPayment | undefined) {
  const linked = state.loc_id !== null && state.loc_id === row.loc_id && row.loc_token !== null;
  const location = linked ? locationUrl(host, row.loc_token!) : undefined;
  const r = state.request;
  return {
    calendario: { criacao: isoZ(row.created_at)!, expiracao: state.expiracao },
    txid: row.txid,
    revisao: state.revisao,
    ...(linked ? { loc: { id: row.loc_id!, txid: row.txid, location: location!, tipoCob: row.loc_tipo_cob!, criacao: isoZ(row.loc_created_at)! } } : {}),
    ...(location ? { location } : {}),
    status: state.status,
    ...(r.devedor ? { devedor: r.devedor } : {}),
    valor: { original: centsToDecimal(state.amount_cents), ...(state.modalidade_alteracao === 1 ? { modalidadeAlteracao: 1 } : {}) },
    chave: state.chave,
    ...(r.solicitacaoPagador !== undefined ? { solicitacaoPagador: r.solicitacaoPagador } : {}),
    ...(r.infoAdicionais !== undefined ? { infoAdicionais: r.infoAdicionais } : {}),
    ...(state.emv !== null && linked ? { pixCopiaECola: state.emv } : {}),
    ...(payment && state.revisao === row.revisao
      ? { pix: [{ endToEndId: payment.endToEndId, txid: row.txid, valor: centsToDecimal(payment.amountCents), chave: state.chave, horario: isoZ(payment.at)! }] }
      : {}),
  };
}

import type { FastifyInstance, FastifyRequest } from 'fastify';
import { normalizeCode, signedReceipt, verifyReceipt, type ReceiptParty, type SignedReceipt } from '../../transactions/receipts.js';
import { errorText } from '../errors.js';
import { html, type Html } from '../html.js';
import { dictionary, formatsOf } from '../i18n.js';
import type { Portal } from '../kit.js';
import { portalRefusal } from '../refusal.js';
import { can } from '../session.js';

const M = dictionary(
  {
    title: 'PIX receipt',
    verifyTitle: 'Verify a PIX receipt',
    amount: 'Amount',
    date: 'Date',
    payer: 'Payer',
    receiver: 'Receiver',
    name: 'Name',
    document: 'CPF/CNPJ',
    bank: 'Institution',
    pixKey: 'PIX key',
    e2e: 'End-to-end id',
    transactionId: 'Transaction id',
    description: 'Description',
    code: 'Authenticity code',
    verifyAt: 'Check this receipt at',
    print: 'Print',
    back: 'Back to the transaction',
    verifyHelp: 'Type the end-to-end id and the authenticity code printed on the receipt. The answer says whether they match a PIX settled here and, if they do, shows what the receipt shows.',
    check: 'Check',
    valid: 'Valid: this receipt was issued by this institution. Compare every field below with the receipt you hold.',
    invalid: 'Invalid: no PIX receipt issued here has this end-to-end id and authenticity code.',
    tooMany: 'Too many checks from your address. Wait a minute and try again.',
  },
  {
    title: 'Comprovante de PIX',
    verifyTitle: 'Verificar um comprovante de PIX',
    amount: 'Valor',
    date: 'Data',
    payer: 'Pagador',
    receiver: 'Recebedor',
    name: 'Nome',
    document: 'CPF/CNPJ',
    bank: 'Instituição',
    pixKey: 'Chave PIX',
    e2e: 'Id end-to-end',
    transactionId: 'Id da transação',
    description: 'Descrição',
    code: 'Código de autenticação',
    verifyAt: 'Confira este comprovante em',
    print: 'Imprimir',
    back: 'Voltar para a transação',
    verifyHelp: 'Digite o id end-to-end e o código de autenticação impressos no comprovante. A resposta diz se eles correspondem a um PIX liquidado aqui e, se corresponderem, mostra o que o comprovante mostra.',
    check: 'Verificar',
    valid: 'Válido: este comprovante foi emitido por esta instituição. Compare cada campo abaixo com o comprovante que você tem.',
    invalid: 'Inválido: nenhum comprovante de PIX emitido aqui tem este id end-to-end e este código de autenticação.',
    tooMany: 'Verificações demais a partir do seu endereço. Espere um minuto e tente de novo.',
  },
);

/** Verification attempts per minute per address (the code has 80 bits; the limit keeps it quiet). */
export const RECEIPT_VERIFY_PER_MINUTE = 30;

/** The path of the public verification page of a receipt. */
export const verifyPath = (r: { end_to_end_id: string; authenticity_code: string }) =>
  `/portal/receipts/verify?e2e=${encodeURIComponent(r.end_to_end_id)}&code=${encodeURIComponent(r.authenticity_code)}`;

/** The receipt's content: the same on the merchant's printable page and on the verification page. */
function receiptBody(req: FastifyRequest, r: SignedReceipt): Html {
  const m = M(req.i18n);
  const f = formatsOf(req.i18n);
  const side = (title: string, p: ReceiptParty, testid: string) => html`<section class="party-box" data-testid="${testid}"><h2>${title}</h2><dl>
<dt>${m.name}</dt><dd>${p.name ?? '—'}</dd>
${p.document ? html`<dt>${m.document}</dt><dd>${p.document}</dd>` : ''}
<dt>${m.bank}</dt><dd>${p.bank_name ?? '—'}${p.ispb ? html` <span class="muted">(ISPB ${p.ispb})</span>` : ''}</dd>
${p.pix_key ? html`<dt>${m.pixKey}</dt><dd class="mono">${p.pix_key}</dd>` : ''}</dl></section>`;
  return html`<div class="receipt card">
<p class="receipt-amount" data-testid="receipt-amount">${f.brl(r.amount)}</p>
<p><span class="label">${m.date}</span> <strong data-testid="receipt-date">${f.dateTimeZone(r.date)}</strong></p>
<div class="receipt-parties">${side(m.payer, r.payer, 'receipt-payer')}${side(m.receiver, r.receiver, 'receipt-receiver')}</div>
<dl class="receipt-ids">
<dt>${m.e2e}</dt><dd class="mono" data-testid="receipt-e2e">${r.end_to_end_id}</dd>
<dt>${m.transactionId}</dt><dd class="mono">${r.transaction_id}</dd>
${r.description ? html`<dt>${m.description}</dt><dd>${r.description}</dd>` : ''}
<dt>${m.code}</dt><dd class="mono code" data-testid="receipt-code">${r.authenticity_code}</dd></dl></div>`;
}

/** The printable receipt of a settled PIX (signed in), and its public verification page. */
export function receiptPages(app: FastifyInstance, portal: Portal) {
  const { ctx, layout, page, forbidden } = portal;

  app.get<{ Params: { id: string } }>('/portal/transactions/:id/receipt', async (req, reply) => {
    const s = req.portal!;
    if (!can(s, 'transfer:read')) return forbidden(req, reply, 'transfer:read');
    const m = M(req.i18n);
    let r: SignedReceipt;
    try {
      r = await signedReceipt(ctx, s.accountId, req.params.id);
    } catch (err) {
      return page(reply, layout(req, m.title, html`<div class="flash error" role="alert">${errorText(err, req.i18n)}</div>`, '/portal/statement'), portalRefusal(err)?.statusCode ?? 500);
    }
    const url = `${ctx.config.tls ? 'https' : 'http'}://${req.headers.host ?? 'localhost'}${verifyPath(r)}`;
    const body = html`${receiptBody(req, r)}
<p class="verify-at">${m.verifyAt} <a class="mono" href="${verifyPath(r)}" data-testid="verify-link">${url}</a></p>
<p class="no-print actions"><a class="button secondary" href="/portal/transactions/${encodeURIComponent(r.transaction_id)}">${m.back}</a> <span class="muted">${m.print}: Ctrl+P / ⌘P</span></p>`;
    return page(reply, layout(req, m.title, body, '/portal/statement'));
  });

  // Public: no session, no API key. Says valid (with the receipt's own fields) or invalid.
  app.get('/portal/receipts/verify', async (req, reply) => {
    const m = M(req.i18n);
    const q = req.query as Record<string, unknown>;
    const e2e = typeof q.e2e === 'string' ? q.e2e.trim().slice(0, 64) : '';
    const code = typeof q.code === 'string' ? q.code.trim().slice(0, 40) : '';
    const form = html`<form class="inline card no-print" method="get" action="/portal/receipts/verify"><p class="muted">${m.verifyHelp}</p>
<label>${m.e2e} <input name="e2e" required maxlength="64" spellcheck="false" value="${e2e}"></label>
<label>${m.code} <input name="code" required maxlength="40" spellcheck="false" value="${code}"></label>
<button type="submit">${m.check}</button></form>`;
    if (!e2e || !code) return page(reply, layout(req, m.verifyTitle, form));
    try {
      const hit = await ctx.rateCounter.hit(`receipt-verify:${portal.clientIp(req)}`, RECEIPT_VERIFY_PER_MINUTE, 60);
      if (!hit.allowed) {
        void reply.header('retry-after', String(hit.retryAfter));
        return page(reply, layout(req, m.verifyTitle, html`<div class="flash error" role="alert">${m.tooMany}</div>${form}`), 429);
      }
    } catch (err) {
      req.log.warn({ err: (err as Error).message }, 'receipt verification limiter unavailable');
    }
    const r = normalizeCode(code) ? await verifyReceipt(ctx, e2e, code) : null;
    const verdict = r
      ? html`<div class="flash ok" role="status" data-testid="verdict" data-valid="true">${m.valid}</div>${receiptBody(req, r)}`
      : html`<div class="flash error" role="alert" data-testid="verdict" data-valid="false">${m.invalid}</div>`;
    return page(reply, layout(req, m.verifyTitle, html`${verdict}${form}`), r ? 200 : 404);
  });
}

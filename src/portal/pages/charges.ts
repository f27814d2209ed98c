import type { FastifyInstance } from 'fastify';
import { createCharge } from '../../pix/cashin/charges.js';
import { parseChargeCommand } from '../../api/pix/charges.routes.js';
import { qrCodeDataUrl } from '../../pix/cashin/qrImage.js';
import { reaisField } from '../errors.js';
import { field, formState } from '../fields.js';
import { opt, type Form } from '../formBody.js';
import { html, type Html } from '../html.js';
import { dictionary, formatsOf } from '../i18n.js';
import { badge, type Portal } from '../kit.js';
import { can } from '../session.js';

const M = dictionary(
  {
    title: 'Charge (PIX cash-in)',
    charge: (id: string) => `Charge ${id}`,
    qrAlt: 'QR code of the charge: pay it with any PIX app',
    expires: (at: string) => `expires ${at}`,
    copyPaste: 'Copy and paste code',
    amount: 'Amount (R$)',
    description: 'Description',
    payerName: 'Payer name (optional)',
    payerDocument: 'Payer CPF/CNPJ (optional)',
    expiresIn: 'Expires in (seconds)',
    externalId: 'External id (optional)',
    submit: 'Create charge',
    created: (id: string) => `Charge ${id} created`,
  },
  {
    title: 'Cobrança (PIX de entrada)',
    charge: (id) => `Cobrança ${id}`,
    qrAlt: 'QR code da cobrança: pague com qualquer app de PIX',
    expires: (at) => `vence em ${at}`,
    copyPaste: 'PIX copia e cola',
    amount: 'Valor (R$)',
    description: 'Descrição',
    payerName: 'Nome do pagador (opcional)',
    payerDocument: 'CPF/CNPJ do pagador (opcional)',
    expiresIn: 'Validade (segundos)',
    externalId: 'Id externo (opcional)',
    submit: 'Criar cobrança',
    created: (id) => `Cobrança ${id} criada`,
  },
);

const labelsOf = (m: ReturnType<typeof M>) => ({
  amount: m.amount,
  description: m.description,
  payer_name: m.payerName,
  payer_document: m.payerDocument,
  expires_in: m.expiresIn,
  external_id: m.externalId,
});

/** A charge (PIX cash-in): the form, and the charge just created with its QR code. */
export function chargePages(app: FastifyInstance, portal: Portal) {
  const { ctx, layout, page, forbidden, csrfField } = portal;

  app.get('/portal/charges', async (req, reply) => {
    const s = req.portal!;
    if (!can(s, 'pix:write')) return forbidden(req, reply, 'pix:write');
    const m = M(req.i18n);
    const f = formatsOf(req.i18n);
    const id = (req.query as Record<string, string>).created;
    let shown: Html = html``;
    if (typeof id === 'string' && /^[A-Z0-9]{1,64}$/.test(id)) {
      const [row] = await ctx.db.query<{ brcode: string; transaction_id: string; amount: number; status: string; expires_at: Date }>(
        `SELECT c.brcode, t.transaction_id, t.amount, c.status, c.expires_at FROM pix_charges c JOIN transactions t ON t.id = c.transaction_uuid
            WHERE t.transaction_id = $1 AND t.account_id = $2`,
        [id, s.accountId],
      );
      if (row) {
        shown = html`<div class="card"><h2>${m.charge(row.transaction_id)}</h2>
<img class="qr" alt="${m.qrAlt}" src="${qrCodeDataUrl(row.brcode)}" data-testid="qr">
<p>${f.brl(row.amount)} · ${badge(row.status, req.i18n)} · ${m.expires(f.dateTime(row.expires_at))}</p>
<label>${m.copyPaste} <textarea readonly rows="3" class="mono" data-testid="emv">${row.brcode}</textarea></label></div>`;
      }
    }
    const st = formState(req, '/portal/charges');
    const l = labelsOf(m);
    const body = html`${shown}<form class="stack card" method="post" action="/portal/charges">${csrfField(req)}
${field(st, { name: 'amount', label: l.amount, required: true, inputmode: 'decimal', placeholder: '25,00', pattern: '[0-9.,]+' })}
${field(st, { name: 'description', label: l.description, maxlength: 140 })}
${field(st, { name: 'payer_name', label: l.payer_name, maxlength: 100 })}
${field(st, { name: 'payer_document', label: l.payer_document, maxlength: 18, inputmode: 'numeric' })}
${field(st, { name: 'expires_in', label: l.expires_in, type: 'number', min: 60, value: '3600' })}
${field(st, { name: 'external_id', label: l.external_id, maxlength: 128 })}
<button type="submit">${m.submit}</button></form>`;
    return page(reply, layout(req, m.title, body, '/portal/charges'));
  });

  app.post('/portal/charges', async (req, reply) => {
    const s = req.portal!;
    if (!can(s, 'pix:write')) return forbidden(req, reply, 'pix:write');
    const f = req.body as Form;
    const m = M(req.i18n);
    const created = (id: string) => ({ redirect: `/portal/charges?created=${encodeURIComponent(id)}`, message: m.created(id) });
    return portal.action(
      req,
      reply,
      '/portal/charges',
      async (form) => {
        const expires = opt(f, 'expires_in');
        const command = parseChargeCommand({
          amount: reaisField(f, 'amount'),
          ...(expires ? { expires_in: /^\d{1,9}$/.test(expires) ? Number(expires) : expires } : {}),
          ...(opt(f, 'description') ? { description: opt(f, 'description') } : {}),
          ...(opt(f, 'payer_name') ? { payer_name: opt(f, 'payer_name') } : {}),
          ...(opt(f, 'payer_document') ? { payer_document: opt(f, 'payer_document') } : {}),
          ...(opt(f, 'external_id') ? { external_id: opt(f, 'external_id') } : {}),
        });
        const answer = await createCharge(ctx, portal.principalOf(s), command, async (tx, _status, body) => {
          const c = created((body as { transaction_id: string }).transaction_id);
          await form.record(tx, form.ok(c.message, c.redirect));
        });
        return created(answer.body.transaction_id);
      },
      labelsOf(m),
    );
  });
}

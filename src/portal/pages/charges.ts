import type { FastifyInstance } from 'fastify';
import { isoZ } from '../../lib/clock.js';
import { createCharge } from '../../pix/cashin/charges.js';
import { parseChargeCommand } from '../../api/pix/charges.routes.js';
import { qrCodeDataUrl } from '../../pix/cashin/qrImage.js';
import { one, opt, type Form } from '../formBody.js';
import { brl, html, parseReais, when, type Html } from '../html.js';
import { badge, type Portal } from '../kit.js';
import { can } from '../session.js';

/** A charge (PIX cash-in): the form, and the charge just created with its QR code. */
export function chargePages(app: FastifyInstance, portal: Portal) {
  const { ctx, layout, page, forbidden, csrfField } = portal;

  app.get('/portal/charges', async (req, reply) => {
    const s = req.portal!;
    if (!can(s, 'pix:write')) return forbidden(req, reply, 'pix:write');
    const id = (req.query as Record<string, string>).created;
    let shown: Html = html``;
    if (typeof id === 'string' && /^[A-Z0-9]{1,64}$/.test(id)) {
      const [row] = await ctx.db.query<{ brcode: string; transaction_id: string; amount: number; status: string; expires_at: Date }>(
        `SELECT c.brcode, t.transaction_id, t.amount, c.status, c.expires_at FROM pix_charges c JOIN transactions t ON t.id = c.transaction_uuid
            WHERE t.transaction_id = $1 AND t.account_id = $2`,
        [id, s.accountId],
      );
      if (row) {
        shown = html`<div class="card"><h2>Charge ${row.transaction_id}</h2>
<img class="qr" alt="QR code of the charge: pay it with any PIX app" src="${qrCodeDataUrl(row.brcode)}" data-testid="qr">
<p>${brl(row.amount)} · ${badge(row.status)} · expires ${when(isoZ(row.expires_at))}</p>
<label>Copy and paste code <textarea readonly rows="3" class="mono" data-testid="emv">${row.brcode}</textarea></label></div>`;
      }
    }
    const body = html`${shown}<form class="stack card" method="post" action="/portal/charges">${csrfField(req)}
<label>Amount (R$) <input name="amount" inputmode="decimal" required placeholder="25,00" pattern="[0-9.,]+"></label>
<label>Description <input name="description" maxlength="140"></label>
<label>Payer name (optional) <input name="payer_name" maxlength="100"></label>
<label>Payer CPF/CNPJ (optional) <input name="payer_document" maxlength="18" inputmode="numeric"></label>
<label>Expires in (seconds) <input name="expires_in" type="number" min="60" value="3600"></label>
<label>External id (optional) <input name="external_id" maxlength="128"></label>
<button type="submit">Create charge</button></form>`;
    return page(reply, layout(req, 'Charge (PIX cash-in)', body, '/portal/charges'));
  });

  app.post('/portal/charges', async (req, reply) => {
    const s = req.portal!;
    if (!can(s, 'pix:write')) return forbidden(req, reply, 'pix:write');
    const f = req.body as Form;
    const created = (id: string) => ({ redirect: `/portal/charges?created=${encodeURIComponent(id)}`, message: `Charge ${id} created` });
    return portal.action(req, reply, '/portal/charges', async (form) => {
      const expires = opt(f, 'expires_in');
      const command = parseChargeCommand({
        amount: parseReais(one(f, 'amount')) ?? -1,
        ...(expires ? { expires_in: Number(expires) } : {}),
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
    });
  });
}

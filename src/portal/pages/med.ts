import { portalRefusal } from '../refusal.js';
import type { FastifyInstance } from 'fastify';
import { getInfraction, listInfractions, submitDefense } from '../../med/merchant.js';
import { parseDefense, parseInfractionQuery } from '../../api/med/routes.js';
import { one, opt, type Form } from '../formBody.js';
import { brl, html, when } from '../html.js';
import { badge, errorText, type Portal } from '../kit.js';
import { can } from '../session.js';

/** The account's MED cases: the list, one case with its defense form, and the defense's action. */
export function medPages(app: FastifyInstance, portal: Portal) {
  const { ctx, layout, page, forbidden, csrfField } = portal;

  app.get('/portal/med', async (req, reply) => {
    const s = req.portal!;
    if (!can(s, 'payment:read')) return forbidden(req, reply, 'payment:read');
    const list = await listInfractions(ctx, s.accountId, parseInfractionQuery({ per_page: '100' }));
    const body = html`<div class="scroll"><table><thead><tr><th>Opened</th><th>Transaction</th><th>Status</th><th class="num">Claimed</th><th class="num">Blocked</th><th>Defense deadline</th></tr></thead><tbody>
${list.data.length === 0 ? html`<tr><td colspan="6" class="muted">No MED cases.</td></tr>` : ''}
${list.data.map(
  (i) => html`<tr><td><a href="/portal/med/${i.id}">${when(i.created_at)}</a></td><td class="mono">${i.transaction_id}</td><td>${badge(i.status)}</td><td class="num">${brl(i.amount)}</td><td class="num">${brl(i.blocked_amount)}</td><td>${when(i.defense_deadline)}</td></tr>`,
)}</tbody></table></div>`;
    return page(reply, layout(req, 'MED cases', body, '/portal/med'));
  });

  app.get<{ Params: { id: string } }>('/portal/med/:id', async (req, reply) => {
    const s = req.portal!;
    if (!can(s, 'payment:read')) return forbidden(req, reply, 'payment:read');
    let i;
    try {
      i = await getInfraction(ctx, s.accountId, req.params.id);
    } catch (err) {
      return page(reply, layout(req, 'MED case', html`<div class="flash error" role="alert">${errorText(err)}</div>`, '/portal/med'), portalRefusal(err)?.statusCode ?? 500);
    }
    const open = i.status === 'OPEN' && i.defense_deadline !== null && new Date(i.defense_deadline).getTime() > ctx.clock.now().getTime();
    const body = html`<div class="card"><table><tbody>
<tr><th scope="row">Status</th><td>${badge(i.status)}</td></tr><tr><th scope="row">Reason</th><td>${i.reason}</td></tr>
<tr><th scope="row">Transaction</th><td class="mono">${i.transaction_id}</td></tr><tr><th scope="row">Payer</th><td>${i.payer.name} · ${i.payer.bank_name ?? i.payer.ispb}</td></tr>
<tr><th scope="row">Claimed</th><td>${brl(i.amount)} of ${brl(i.original_amount)}</td></tr><tr><th scope="row">Blocked</th><td>${brl(i.blocked_amount)}</td></tr>
<tr><th scope="row">Defense deadline</th><td><strong>${when(i.defense_deadline)}</strong></td></tr>
${i.decision ? html`<tr><th scope="row">Decision</th><td>${i.decision}</td></tr>` : ''}</tbody></table></div>
${i.defense ? html`<h2>Your defense</h2><div class="card"><p>${i.defense.text}</p><p class="muted">Submitted ${when(i.defense.submitted_at)}</p></div>` : ''}
${
  open && can(s, 'payment:write')
    ? html`<h2>Defense</h2><form class="stack card" method="post" action="/portal/med/${i.id}/defense">${csrfField(req)}
<label>What happened <textarea name="text" rows="6" required maxlength="5000"></textarea></label>
<label>Link to a document (optional) <input name="attachment_url" type="url" maxlength="2048"></label>
<button type="submit">Submit defense</button></form>`
    : ''
}`;
    return page(reply, layout(req, 'MED case', body, '/portal/med'));
  });

  app.post<{ Params: { id: string } }>('/portal/med/:id/defense', async (req, reply) => {
    const s = req.portal!;
    if (!can(s, 'payment:write')) return forbidden(req, reply, 'payment:write');
    const f = req.body as Form;
    return portal.action(req, reply, `/portal/med/${encodeURIComponent(req.params.id)}`, async () => {
      const url = opt(f, 'attachment_url');
      const defense = parseDefense({ text: one(f, 'text') ?? '', ...(url ? { attachments: [{ url }] } : {}) });
      await submitDefense(ctx, s.accountId, req.params.id, defense, async () => {});
      return 'Defense submitted';
    });
  });
}

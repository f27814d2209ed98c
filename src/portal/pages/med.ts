import { portalRefusal } from '../refusal.js';
import type { FastifyInstance } from 'fastify';
import { getInfraction, listInfractions, submitDefense } from '../../med/merchant.js';
import { parseDefense, parseInfractionQuery } from '../../api/med/routes.js';
import { errorText } from '../errors.js';
import { field, formState } from '../fields.js';
import { one, opt, type Form } from '../formBody.js';
import { html } from '../html.js';
import { dictionary, formatsOf } from '../i18n.js';
import { badge, type Portal } from '../kit.js';
import { can } from '../session.js';

const M = dictionary(
  {
    listTitle: 'MED cases',
    caseTitle: 'MED case',
    opened: 'Opened',
    transaction: 'Transaction',
    status: 'Status',
    claimed: 'Claimed',
    blocked: 'Blocked',
    deadline: 'Defense deadline',
    none: 'No MED cases.',
    reason: 'Reason',
    payer: 'Payer',
    claimedOf: (amount: string, of: string) => `${amount} of ${of}`,
    decision: 'Decision',
    yourDefense: 'Your defense',
    submitted: (at: string) => `Submitted ${at}`,
    defense: 'Defense',
    text: 'What happened',
    attachment: 'Link to a document (optional)',
    submit: 'Submit defense',
    done: 'Defense submitted',
  },
  {
    listTitle: 'Casos MED',
    caseTitle: 'Caso MED',
    opened: 'Aberto em',
    transaction: 'Transação',
    status: 'Situação',
    claimed: 'Contestado',
    blocked: 'Bloqueado',
    deadline: 'Prazo da defesa',
    none: 'Nenhum caso MED.',
    reason: 'Motivo',
    payer: 'Pagador',
    claimedOf: (amount, of) => `${amount} de ${of}`,
    decision: 'Decisão',
    yourDefense: 'Sua defesa',
    submitted: (at) => `Enviada em ${at}`,
    defense: 'Defesa',
    text: 'O que aconteceu',
    attachment: 'Link para um documento (opcional)',
    submit: 'Enviar defesa',
    done: 'Defesa enviada',
  },
);

/** The account's MED cases: the list, one case with its defense form, and the defense's action. */
export function medPages(app: FastifyInstance, portal: Portal) {
  const { ctx, layout, page, forbidden, csrfField } = portal;

  app.get('/portal/med', async (req, reply) => {
    const s = req.portal!;
    if (!can(s, 'payment:read')) return forbidden(req, reply, 'payment:read');
    const m = M(req.i18n);
    const f = formatsOf(req.i18n);
    const list = await listInfractions(ctx, s.accountId, parseInfractionQuery({ per_page: '100' }));
    const body = html`<div class="scroll"><table><thead><tr><th>${m.opened}</th><th class="hide-sm">${m.transaction}</th><th>${m.status}</th><th class="num">${m.claimed}</th><th class="num hide-sm">${m.blocked}</th><th>${m.deadline}</th></tr></thead><tbody>
${list.data.length === 0 ? html`<tr><td colspan="6" class="muted">${m.none}</td></tr>` : ''}
${list.data.map(
  (i) => html`<tr><td><a href="/portal/med/${i.id}">${f.dateTime(i.created_at)}</a></td><td class="mono hide-sm">${i.transaction_id}</td><td>${badge(i.status, req.i18n)}</td><td class="num">${f.brl(i.amount)}</td><td class="num hide-sm">${f.brl(i.blocked_amount)}</td><td>${f.dateTime(i.defense_deadline)}</td></tr>`,
)}</tbody></table></div>`;
    return page(reply, layout(req, m.listTitle, body, '/portal/med'));
  });

  app.get<{ Params: { id: string } }>('/portal/med/:id', async (req, reply) => {
    const s = req.portal!;
    if (!can(s, 'payment:read')) return forbidden(req, reply, 'payment:read');
    const m = M(req.i18n);
    const f = formatsOf(req.i18n);
    let i;
    try {
      i = await getInfraction(ctx, s.accountId, req.params.id);
    } catch (err) {
      return page(reply, layout(req, m.caseTitle, html`<div class="flash error" role="alert">${errorText(err, req.i18n)}</div>`, '/portal/med'), portalRefusal(err)?.statusCode ?? 500);
    }
    const open = i.status === 'OPEN' && i.defense_deadline !== null && new Date(i.defense_deadline).getTime() > ctx.clock.now().getTime();
    const action = `/portal/med/${i.id}/defense`;
    const st = formState(req, action);
    const body = html`<div class="card"><table class="fields"><tbody>
<tr><th scope="row">${m.status}</th><td>${badge(i.status, req.i18n)}</td></tr><tr><th scope="row">${m.reason}</th><td>${i.reason}</td></tr>
<tr><th scope="row">${m.transaction}</th><td class="mono"><a href="/portal/transactions/${encodeURIComponent(i.transaction_id)}">${i.transaction_id}</a></td></tr><tr><th scope="row">${m.payer}</th><td>${i.payer.name} · ${i.payer.bank_name ?? i.payer.ispb}</td></tr>
<tr><th scope="row">${m.claimed}</th><td>${m.claimedOf(f.brl(i.amount), f.brl(i.original_amount))}</td></tr><tr><th scope="row">${m.blocked}</th><td>${f.brl(i.blocked_amount)}</td></tr>
<tr><th scope="row">${m.deadline}</th><td><strong>${f.dateTimeZone(i.defense_deadline)}</strong></td></tr>
${i.decision ? html`<tr><th scope="row">${m.decision}</th><td>${i.decision}</td></tr>` : ''}</tbody></table></div>
${i.defense ? html`<h2>${m.yourDefense}</h2><div class="card"><p class="prose">${i.defense.text}</p><p class="muted">${m.submitted(f.dateTime(i.defense.submitted_at))}</p></div>` : ''}
${
  open && can(s, 'payment:write')
    ? html`<h2>${m.defense}</h2><form class="stack card" method="post" action="${action}">${csrfField(req)}
${field(st, { name: 'text', label: m.text, rows: 6, required: true, maxlength: 5000 })}
${field(st, { name: 'attachment_url', label: m.attachment, type: 'url', maxlength: 2048 })}
<button type="submit">${m.submit}</button></form>`
    : ''
}`;
    return page(reply, layout(req, m.caseTitle, body, '/portal/med'));
  });

  app.post<{ Params: { id: string } }>('/portal/med/:id/defense', async (req, reply) => {
    const s = req.portal!;
    if (!can(s, 'payment:write')) return forbidden(req, reply, 'payment:write');
    const f = req.body as Form;
    const m = M(req.i18n);
    return portal.action(
      req,
      reply,
      `/portal/med/${encodeURIComponent(req.params.id)}`,
      async () => {
        const url = opt(f, 'attachment_url');
        const defense = parseDefense({ text: one(f, 'text') ?? '', ...(url ? { attachments: [{ url }] } : {}) });
        await submitDefense(ctx, s.accountId, req.params.id, defense, async () => {});
        return m.done;
      },
      { text: m.text, attachment_url: m.attachment, 'attachments.0.url': m.attachment },
    );
  });
}

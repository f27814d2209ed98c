import type { FastifyInstance } from 'fastify';
import { readBalances } from '../../ledger/ledger.js';
import { parseTef, transfer, type TefResponse } from '../../tef/tef.js';
import { reaisField } from '../errors.js';
import { field, formState } from '../fields.js';
import { opt, type Form } from '../formBody.js';
import { html } from '../html.js';
import { dictionary, formatsOf } from '../i18n.js';
import type { Portal } from '../kit.js';
import { portalRefusal } from '../refusal.js';
import { can } from '../session.js';
import { stepUpRequired } from '../stepUp.js';

const M = dictionary(
  {
    title: 'Transfer between accounts (TEF)',
    intro: 'Move money at once to another account of this institution: one of your own accounts (by its number) or another merchant’s (by one of its PIX keys). No fee.',
    availableNow: 'Available now:',
    amount: 'Amount (R$)',
    pixKey: 'PIX key of the destination',
    accountId: '…or one of your account numbers',
    description: 'Description',
    externalId: 'External id (optional, makes a retry safe)',
    submit: 'Transfer',
    done: (amount: string, to: string, id: string) => `Transferred ${amount} to ${to} (${id})`,
  },
  {
    title: 'Transferência entre contas (TEF)',
    intro: 'Envie dinheiro na hora para outra conta desta instituição: uma das suas contas (pelo número) ou a de outro lojista (por uma das chaves PIX dele). Sem tarifa.',
    availableNow: 'Disponível agora:',
    amount: 'Valor (R$)',
    pixKey: 'Chave PIX do destino',
    accountId: '…ou o número de uma das suas contas',
    description: 'Descrição',
    externalId: 'Id externo (opcional; torna a repetição segura)',
    submit: 'Transferir',
    done: (amount, to, id) => `Transferido ${amount} para ${to} (${id})`,
  },
);

/** A transfer between accounts of this institution (TEF): the form and its action. */
export function tefPages(app: FastifyInstance, portal: Portal) {
  const { ctx, layout, page, forbidden, csrfField } = portal;
  const labelsOf = (m: ReturnType<typeof M>) => ({ amount: m.amount, pix_key: m.pixKey, account_id: m.accountId, description: m.description, external_id: m.externalId });

  app.get('/portal/tef', async (req, reply) => {
    const s = req.portal!;
    if (!can(s, 'transfer:write')) return forbidden(req, reply, 'transfer:write');
    const m = M(req.i18n);
    const b = await readBalances(ctx.db, s.accountId);
    const st = formState(req, '/portal/tef');
    const l = labelsOf(m);
    const body = html`<p>${m.intro}</p>
<p>${m.availableNow} <strong data-testid="available">${formatsOf(req.i18n).brl(b.safe)}</strong></p>
<form class="stack card" method="post" action="/portal/tef">${csrfField(req)}
${field(st, { name: 'amount', label: l.amount, required: true, inputmode: 'decimal', placeholder: '10,00', pattern: '[0-9.,]+' })}
${field(st, { name: 'pix_key', label: l.pix_key, maxlength: 77, spellcheck: false })}
${field(st, { name: 'account_id', label: l.account_id, inputmode: 'numeric', pattern: '[0-9]*' })}
${field(st, { name: 'description', label: l.description, maxlength: 140 })}
${field(st, { name: 'external_id', label: l.external_id, maxlength: 128 })}
<button type="submit">${m.submit}</button></form>`;
    return page(reply, layout(req, m.title, body, '/portal/tef'));
  });

  app.post('/portal/tef', async (req, reply) => {
    const s = req.portal!;
    if (!can(s, 'transfer:write')) return forbidden(req, reply, 'transfer:write');
    const stepUp = stepUpRequired(portal, req, reply, '/portal/tef'); // moving money out: sensitive
    if (stepUp) return stepUp;
    const f = req.body as Form;
    const m = M(req.i18n);
    const fmt = formatsOf(req.i18n);
    const done = (body: TefResponse) => m.done(fmt.brl(body.amount), body.recipient.name, body.transaction_id);
    return portal.action(
      req,
      reply,
      '/portal/tef',
      async (form) => {
        const account = opt(f, 'account_id');
        const command = parseTef({
          amount: reaisField(f, 'amount'),
          ...(account ? { account_id: /^\d{1,15}$/.test(account) ? Number(account) : account } : {}),
          ...(opt(f, 'pix_key') ? { pix_key: opt(f, 'pix_key') } : {}),
          ...(opt(f, 'description') ? { description: opt(f, 'description') } : {}),
          ...(opt(f, 'external_id') ? { external_id: opt(f, 'external_id') } : {}),
        });
        // The outcome (a settled or a recorded failed transfer) is recorded with the transfer.
        const answer = await transfer(ctx, { merchantId: s.key.merchant_id, accountId: s.accountId }, command, (tx, answer) =>
          form.record(tx, 'statusCode' in answer ? form.ok(done(answer.body)) : form.refused(portalRefusal(answer)!.statusCode, portalRefusal(answer)!.body)),
        );
        return done(answer.body);
      },
      labelsOf(m),
    );
  });
}

import type { FastifyInstance } from 'fastify';
import { readBalances } from '../../ledger/ledger.js';
import { parseTef, transfer, type TefResponse } from '../../tef/tef.js';
import { one, opt, type Form } from '../formBody.js';
import { brl, html, parseReais } from '../html.js';
import type { Portal } from '../kit.js';
import { portalRefusal } from '../refusal.js';
import { can } from '../session.js';
import { stepUpRequired } from '../stepUp.js';

/** A transfer between accounts of this institution (TEF): the form and its action. */
export function tefPages(app: FastifyInstance, portal: Portal) {
  const { ctx, layout, page, forbidden, csrfField } = portal;

  app.get('/portal/tef', async (req, reply) => {
    const s = req.portal!;
    if (!can(s, 'transfer:write')) return forbidden(req, reply, 'transfer:write');
    const b = await readBalances(ctx.db, s.accountId);
    const body = html`<p>Move money at once to another account of this institution: one of your own accounts (by its number) or another merchant’s (by one of its PIX keys). No fee.</p>
<p>Available now: <strong data-testid="available">${brl(b.safe)}</strong></p>
<form class="stack card" method="post" action="/portal/tef">${csrfField(req)}
<label>Amount (R$) <input name="amount" inputmode="decimal" required placeholder="10,00" pattern="[0-9.,]+"></label>
<label>PIX key of the destination <input name="pix_key" maxlength="77" spellcheck="false"></label>
<label>…or one of your account numbers <input name="account_id" inputmode="numeric" pattern="[0-9]*"></label>
<label>Description <input name="description" maxlength="140"></label>
<label>External id (optional, makes a retry safe) <input name="external_id" maxlength="128"></label>
<button type="submit">Transfer</button></form>`;
    return page(reply, layout(req, 'Transfer between accounts (TEF)', body, '/portal/tef'));
  });

  app.post('/portal/tef', async (req, reply) => {
    const s = req.portal!;
    if (!can(s, 'transfer:write')) return forbidden(req, reply, 'transfer:write');
    const stepUp = stepUpRequired(portal, req, reply, '/portal/tef'); // moving money out: sensitive
    if (stepUp) return stepUp;
    const f = req.body as Form;
    const done = (body: TefResponse) => `Transferred ${brl(body.amount)} to ${body.recipient.name} (${body.transaction_id})`;
    return portal.action(req, reply, '/portal/tef', async (form) => {
      const account = opt(f, 'account_id');
      const command = parseTef({
        amount: parseReais(one(f, 'amount')) ?? -1,
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
    });
  });
}

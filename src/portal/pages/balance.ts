import type { FastifyInstance } from 'fastify';
import { readBalances } from '../../ledger/ledger.js';
import { brl, html, when } from '../html.js';
import type { Portal } from '../kit.js';
import { can } from '../session.js';

/** The balance page: available, blocked and pending, from the ledger. */
export function balancePage(app: FastifyInstance, portal: Portal) {
  const { ctx, layout, page, forbidden } = portal;

  app.get('/portal/balance', async (req, reply) => {
    const s = req.portal!;
    if (!can(s, 'account:read')) return forbidden(req, reply, 'account:read');
    const b = await readBalances(ctx.db, s.accountId);
    const figure = (label: string, value: number, note: string) =>
      html`<div class="card"><div class="label">${label}</div><div class="figure" data-testid="${label.toLowerCase()}">${brl(value)}</div><div class="muted">${note}</div></div>`;
    return page(
      reply,
      layout(
        req,
        'Balance',
        html`<div class="grid">
${figure('Available', b.available, 'What you can send now')}
${figure('Blocked', b.blocked, 'Precautionary MED blocks')}
${figure('Pending', b.pending, 'Reserved for payments in flight')}
</div><p class="muted">Total held for you: ${brl(b.ledgerTotal)} · safe balance for new payments: ${brl(b.safe)} · as of ${when(ctx.clock.now().toISOString())}</p>`,
        '/portal/balance',
      ),
    );
  });
}

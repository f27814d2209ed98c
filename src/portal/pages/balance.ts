import type { FastifyInstance } from 'fastify';
import { readBalances } from '../../ledger/ledger.js';
import { html } from '../html.js';
import { dictionary, formatsOf } from '../i18n.js';
import type { Portal } from '../kit.js';
import { can } from '../session.js';

const M = dictionary(
  {
    title: 'Balance',
    available: 'Available',
    availableNote: 'What you can send now',
    blocked: 'Blocked',
    blockedNote: 'Precautionary MED blocks',
    pending: 'Pending',
    pendingNote: 'Reserved for payments in flight',
    summary: (total: string, safe: string, at: string) => `Total held for you: ${total} · safe balance for new payments: ${safe} · as of ${at}`,
  },
  {
    title: 'Saldo',
    available: 'Disponível',
    availableNote: 'O que você pode enviar agora',
    blocked: 'Bloqueado',
    blockedNote: 'Bloqueios cautelares do MED',
    pending: 'Pendente',
    pendingNote: 'Reservado para pagamentos em andamento',
    summary: (total, safe, at) => `Total guardado para você: ${total} · saldo seguro para novos pagamentos: ${safe} · em ${at}`,
  },
);

/** The balance page: available, blocked and pending, from the ledger. */
export function balancePage(app: FastifyInstance, portal: Portal) {
  const { ctx, layout, page, forbidden } = portal;

  app.get('/portal/balance', async (req, reply) => {
    const s = req.portal!;
    if (!can(s, 'account:read')) return forbidden(req, reply, 'account:read');
    const m = M(req.i18n);
    const f = formatsOf(req.i18n);
    const b = await readBalances(ctx.db, s.accountId);
    const figure = (id: string, label: string, value: number, note: string) =>
      html`<div class="card"><div class="label">${label}</div><div class="figure" data-testid="${id}">${f.brl(value)}</div><div class="muted">${note}</div></div>`;
    return page(
      reply,
      layout(
        req,
        m.title,
        html`<div class="grid">
${figure('available', m.available, b.available, m.availableNote)}
${figure('blocked', m.blocked, b.blocked, m.blockedNote)}
${figure('pending', m.pending, b.pending, m.pendingNote)}
</div><p class="muted">${m.summary(f.brl(b.ledgerTotal), f.brl(b.safe), f.dateTime(ctx.clock.now()))}</p>`,
        '/portal/balance',
      ),
    );
  });
}

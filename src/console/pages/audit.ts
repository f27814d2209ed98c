import type { FastifyInstance } from 'fastify';
import { html } from '../../portal/html.js';
import { parseZonedDateTime } from '../../portal/i18n.js';
import { at, type ConsoleKit } from '../kit.js';
import { auditRows, type AuditFilter } from '../queries.js';

const PAGE = 50;
const CSV_MAX = 10_000;

type Q = { operator?: string; action?: string; from?: string; to?: string; before?: string };

function filterOf(q: Q, limit: number): AuditFilter {
  const text = (v: unknown) => (typeof v === 'string' && v.trim() ? v.trim().slice(0, 100) : undefined);
  const when = (v: unknown) => (typeof v === 'string' && v ? (parseZonedDateTime(v, 'America/Sao_Paulo') ?? undefined) : undefined);
  return {
    operator: text(q.operator),
    action: text(q.action),
    from: when(q.from),
    to: when(q.to),
    before: typeof q.before === 'string' && /^\d{1,15}$/.test(q.before) ? Number(q.before) : undefined,
    limit,
  };
}

/** A CSV cell: quoted, and a formula's first character neutralised (a spreadsheet must not run it). */
export function cell(v: unknown): string {
  let s = v === null || v === undefined ? '' : typeof v === 'string' ? v : JSON.stringify(v);
  if (/^[=+\-@\t\r]/.test(s)) s = `'${s}`;
  return `"${s.replace(/"/g, '""')}"`;
}

/** The operator audit log (admin API and console writes), filtered by operator, action and period; CSV export. */
export function auditPages(app: FastifyInstance, kit: ConsoleKit) {
  const { ctx, layout, page, allow } = kit;

  app.get<{ Querystring: Q }>('/console/audit', async (req, reply) => {
    if (!allow(req, reply, 'audit:read')) return reply;
    const q = req.query;
    const rows = await auditRows(ctx.db, filterOf(q, PAGE));
    const params = (extra: Record<string, string>) =>
      new URLSearchParams({ ...Object.fromEntries(Object.entries(q).filter(([k, v]) => k !== 'before' && typeof v === 'string')), ...extra }).toString();
    const body = html`<form class="inline card" method="get" action="/console/audit">
<label>Operator <input name="operator" value="${q.operator ?? ''}" maxlength="100" placeholder="username"></label>
<label>Action <input name="action" value="${q.action ?? ''}" maxlength="100" placeholder="deposit, test, …"></label>
<label>From <input type="datetime-local" name="from" value="${q.from ?? ''}"></label>
<label>To <input type="datetime-local" name="to" value="${q.to ?? ''}"></label>
<button type="submit">Filter</button> <a class="button" href="/console/audit.csv?${params({})}">Export CSV</a></form>
<div class="scroll"><table data-testid="audit"><thead><tr><th>When (São Paulo)</th><th>Who</th><th>Action</th><th>Target</th><th>Status</th><th>From</th></tr></thead><tbody>
${rows.map(
  (r) => html`<tr><td>${at(r.at)}</td><td>${r.actor}</td><td class="mono">${r.method} ${r.route}</td><td class="mono">${JSON.stringify(r.target)}</td><td>${r.status ?? '—'}</td><td class="mono">${r.client_ip}</td></tr>`,
)}</tbody></table></div>
${rows.length === PAGE ? html`<p><a href="/console/audit?${params({ before: String(rows[rows.length - 1]!.id) })}">Older entries</a></p>` : ''}`;
    return page(reply, layout(req, 'Audit log', body, '/console/audit'));
  });

  app.get<{ Querystring: Q }>('/console/audit.csv', async (req, reply) => {
    if (!allow(req, reply, 'audit:read')) return reply;
    const rows = await auditRows(ctx.db, filterOf(req.query, CSV_MAX));
    const lines = ['id,at,actor,client_ip,method,route,target,request_id,status'];
    for (const r of rows) lines.push([r.id, r.at.toISOString(), r.actor, r.client_ip, r.method, r.route, r.target, r.request_id, r.status].map(cell).join(','));
    return reply
      .type('text/csv; charset=utf-8')
      .header('content-disposition', 'attachment; filename="pixgate-audit.csv"')
      .send(lines.join('\r\n') + '\r\n');
  });
}

import type { FastifyReply, FastifyRequest } from 'fastify';
import { html, type Html } from '../portal/html.js';
import { cell } from './pages/audit.js';
import { localeOfRequest } from './kit.js';
import { CM } from './messages.js';

/**
 * The console's one paging and CSV mechanism for its lists: `?page=N` (limit/offset, 50 a page,
 * bounded at page 200), the query asks for one row more to know whether a next page exists; a list's
 * CSV export holds at most CSV_MAX rows, each cell quoted and formula-safe (`cell`).
 */
export const PAGE_SIZE = 50;
export const MAX_PAGE = 200;
export const CSV_MAX = 10_000;

export interface PageAt {
  page: number;
  limit: number;
  offset: number;
}

export function pageOf(req: FastifyRequest): PageAt {
  const raw = (req.query as Record<string, unknown> | undefined)?.page;
  const n = typeof raw === 'string' && /^\d{1,4}$/.test(raw) ? Number(raw) : 1;
  const page = Math.min(Math.max(n, 1), MAX_PAGE);
  return { page, limit: PAGE_SIZE + 1, offset: (page - 1) * PAGE_SIZE };
}

/** The rows of this page and whether a next one exists (the query fetched `PAGE_SIZE + 1`). */
export function cut<T>(rows: T[]): { rows: T[]; more: boolean } {
  return { rows: rows.slice(0, PAGE_SIZE), more: rows.length > PAGE_SIZE };
}

/** The links under a list: first page, next page, and the list's CSV export. */
export function pager(req: FastifyRequest, at: PageAt, more: boolean, csvHref: string): Html {
  const t = CM(localeOfRequest(req));
  const path = req.url.split('?')[0]!;
  const link = (page: number) => {
    const q = new URLSearchParams(Object.entries((req.query as Record<string, unknown>) ?? {}).filter((e): e is [string, string] => typeof e[1] === 'string' && e[0] !== 'page'));
    q.set('page', String(page));
    return `${path}?${q.toString()}`;
  };
  return html`<p class="pager" data-testid="pager">${at.page > 1 ? html`<a href="${link(1)}">${t.previous}</a> ` : ''}${more && at.page < MAX_PAGE ? html`<a href="${link(at.page + 1)}" rel="next">${t.next}</a> ` : ''}<a href="${csvHref}">${t.exportCsv}</a></p>`;
}

/** A CSV download: the header, then one line per row, every cell quoted and formula-safe. */
export function sendCsv(reply: FastifyReply, name: string, header: string[], rows: unknown[][]): FastifyReply {
  const lines = [header.join(',')];
  for (const r of rows) lines.push(r.map(cell).join(','));
  return reply.type('text/csv; charset=utf-8').header('content-disposition', `attachment; filename="pixgate-${name}.csv"`).send(lines.join('\r\n') + '\r\n');
}

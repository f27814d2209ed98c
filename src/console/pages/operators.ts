import type { FastifyInstance } from 'fastify';
import { createOperator, disableOperator, isOperatorRole, listOperators, OPERATOR_CAPABILITIES, OPERATOR_ROLES } from '../../auth/operators.js';
import { one, type Form } from '../../portal/formBody.js';
import { html } from '../../portal/html.js';
import { auditedWrite } from '../audit.js';
import { CSV_MAX, cut, pageOf, pager, sendCsv } from '../paging.js';
import { enrollment, lang, refusalText, type ConsoleKit } from '../kit.js';
import { dictionary } from '../../portal/i18n.js';

/** Operators (owner only): the list, the roles table, and a new operator with its TOTP shown once. */
export function operatorPages(app: FastifyInstance, kit: ConsoleKit) {
  const { ctx, layout, page, allow, csrf } = kit;

  const list = async (req: Parameters<typeof csrf>[0], error = '') => {
    const { L, at } = lang(req);
    const t = M(L);
    const at0 = pageOf(req);
    const { rows: ops, more } = cut(await listOperators(ctx.db, at0.limit, at0.offset));
    return html`${error ? html`<div class="flash error" role="alert">${error}</div>` : ''}
<div class="scroll"><table data-testid="operators"><thead><tr><th>${t.username}</th><th>${t.role}</th><th>${t.factor}</th><th>${t.status}</th><th>${t.created}</th><th></th></tr></thead><tbody>
${ops.map(
  (o) => html`<tr data-operator="${o.username}"><td>${o.username}</td><td>${o.role}</td><td>${o.totp_enabled ? t.confirmed : t.unconfirmed}</td><td>${o.status}</td><td>${at(o.created_at)} ${t.by} ${o.created_by}</td>
<td>${o.status === 'active' && o.id !== req.console!.operator.id ? html`<form method="post" action="/console/operators/${o.id}/disable">${csrf(req)}<button class="danger" type="submit">${t.disable}</button></form>` : ''}</td></tr>`,
)}</tbody></table></div>${pager(req, at0, more, '/console/operators.csv')}
<h2>${t.newOp}</h2><form class="stack card" method="post" action="/console/operators">${csrf(req)}
<label>${t.username} <input name="username" required maxlength="40"></label>
<label>${t.initialPw} <input name="password" type="password" autocomplete="new-password" required minlength="12" maxlength="200"></label>
<label>${t.role} <select name="role">${OPERATOR_ROLES.map((r) => html`<option>${r}</option>`)}</select></label>
<button type="submit">${t.create}</button></form>
<h2>${t.roles}</h2><div class="scroll"><table><thead><tr><th>${t.role}</th><th>${t.may}</th></tr></thead><tbody>
${OPERATOR_ROLES.map((r) => html`<tr><td>${r}</td><td>${OPERATOR_CAPABILITIES[r].join(', ')}</td></tr>`)}</tbody></table></div>`;
  };

  app.get('/console/operators', async (req, reply) => {
    if (!allow(req, reply, 'operators:manage')) return reply;
    return page(reply, layout(req, M(lang(req).L).title, await list(req), '/console/operators'));
  });

  app.get('/console/operators.csv', async (req, reply) => {
    if (!allow(req, reply, 'operators:manage')) return reply;
    const ops = await listOperators(ctx.db, CSV_MAX, 0);
    return sendCsv(reply, 'operators', ['id', 'username', 'role', 'totp_confirmed', 'status', 'created_at', 'created_by'],
      ops.map((o) => [o.id, o.username, o.role, o.totp_enabled, o.status, o.created_at.toISOString(), o.created_by]));
  });

  app.post<{ Params: { id: string } }>('/console/operators/:id/disable', async (req, reply) => {
    if (!allow(req, reply, 'operators:manage')) return reply;
    const id = /^\d{1,15}$/.test(req.params.id) ? Number(req.params.id) : 0;
    const { L } = lang(req);
    try {
      const by = `operator:${req.console!.operator.username}`;
      const row = await auditedWrite(ctx, req, by, { operator_id: id }, () => disableOperator(ctx.db, id, req.console!.operator.id), (r) => ({ username: r.username }));
      return kit.flashAndBack(req, reply, 'ok', M(L).disabled(row.username), '/console/operators');
    } catch (err) {
      return kit.flashAndBack(req, reply, 'error', refusalText(err, L), '/console/operators');
    }
  });

  app.post('/console/operators', async (req, reply) => {
    if (!allow(req, reply, 'operators:manage')) return reply;
    const f = req.body as Form;
    const username = (one(f, 'username') ?? '').trim().toLowerCase();
    const role = one(f, 'role');
    const { L } = lang(req);
    const t = M(L);
    if (!isOperatorRole(role)) return page(reply, layout(req, t.title, await list(req, t.chooseRole), '/console/operators'), 422);
    try {
      const by = `operator:${req.console!.operator.username}`;
      const { operator, totpSecret } = await auditedWrite(ctx, req, by, { username, role }, () =>
        createOperator(ctx.db, { username, password: one(f, 'password') ?? '', role, createdBy: by }), (r) => ({ operator_id: r.operator.id }),
      );
      return page(reply, layout(req, t.createdTitle(operator.username), html`<p>${t.handOver(operator.username)}</p>${enrollment(L, operator.username, totpSecret, false)}`, '/console/operators'));
    } catch (err) {
      return page(reply, layout(req, t.title, await list(req, refusalText(err, L)), '/console/operators'), 422);
    }
  });
}

const M = dictionary(
  {
    title: 'Operators', username: 'Username', role: 'Role', factor: 'Second factor', status: 'Status', created: 'Created', confirmed: 'confirmed',
    unconfirmed: 'not yet confirmed', by: 'by', disable: 'Disable', newOp: 'New operator', initialPw: 'Initial password (at least 12 characters)',
    create: 'Create the operator', roles: 'Roles', may: 'May', chooseRole: 'Choose a role.',
    disabled: (u: string) => `Operator ${u} disabled; their sessions ended.`,
    createdTitle: (u: string) => `Operator ${u} created`,
    handOver: (u: string) => `Hand this to ${u} over a safe channel; it is not shown again.`,
  },
  {
    title: 'Operadores', username: 'Usuário', role: 'Papel', factor: 'Segundo fator', status: 'Situação', created: 'Criado em', confirmed: 'confirmado',
    unconfirmed: 'ainda não confirmado', by: 'por', disable: 'Desativar', newOp: 'Novo operador', initialPw: 'Senha inicial (no mínimo 12 caracteres)',
    create: 'Criar o operador', roles: 'Papéis', may: 'Pode', chooseRole: 'Escolha um papel.',
    disabled: (u: string) => `Operador ${u} desativado; as sessões dele foram encerradas.`,
    createdTitle: (u: string) => `Operador ${u} criado`,
    handOver: (u: string) => `Entregue isto a ${u} por um canal seguro; não é mostrado de novo.`,
  },
);

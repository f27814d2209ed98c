import type { FastifyInstance } from 'fastify';
import { createOperator, disableOperator, isOperatorRole, listOperators, OPERATOR_CAPABILITIES, OPERATOR_ROLES } from '../../auth/operators.js';
import { one, type Form } from '../../portal/formBody.js';
import { html } from '../../portal/html.js';
import { auditedWrite } from '../audit.js';
import { at, enrollment, refusalText, type ConsoleKit } from '../kit.js';

/** Operators (owner only): the list, the roles table, and a new operator with its TOTP shown once. */
export function operatorPages(app: FastifyInstance, kit: ConsoleKit) {
  const { ctx, layout, page, allow, csrf } = kit;

  const list = async (req: Parameters<typeof csrf>[0], error = '') => {
    const ops = await listOperators(ctx.db);
    return html`${error ? html`<div class="flash error" role="alert">${error}</div>` : ''}
<div class="scroll"><table data-testid="operators"><thead><tr><th>Username</th><th>Role</th><th>Second factor</th><th>Status</th><th>Created</th><th></th></tr></thead><tbody>
${ops.map(
  (o) => html`<tr data-operator="${o.username}"><td>${o.username}</td><td>${o.role}</td><td>${o.totp_enabled ? 'confirmed' : 'not yet confirmed'}</td><td>${o.status}</td><td>${at(o.created_at)} by ${o.created_by}</td>
<td>${o.status === 'active' && o.id !== req.console!.operator.id ? html`<form method="post" action="/console/operators/${o.id}/disable">${csrf(req)}<button class="danger" type="submit">Disable</button></form>` : ''}</td></tr>`,
)}</tbody></table></div>
<h2>New operator</h2><form class="stack card" method="post" action="/console/operators">${csrf(req)}
<label>Username <input name="username" required maxlength="40"></label>
<label>Initial password (at least 12 characters) <input name="password" type="password" autocomplete="new-password" required minlength="12" maxlength="200"></label>
<label>Role <select name="role">${OPERATOR_ROLES.map((r) => html`<option>${r}</option>`)}</select></label>
<button type="submit">Create the operator</button></form>
<h2>Roles</h2><div class="scroll"><table><thead><tr><th>Role</th><th>May</th></tr></thead><tbody>
${OPERATOR_ROLES.map((r) => html`<tr><td>${r}</td><td>${OPERATOR_CAPABILITIES[r].join(', ')}</td></tr>`)}</tbody></table></div>`;
  };

  app.get('/console/operators', async (req, reply) => {
    if (!allow(req, reply, 'operators:manage')) return reply;
    return page(reply, layout(req, 'Operators', await list(req), '/console/operators'));
  });

  app.post<{ Params: { id: string } }>('/console/operators/:id/disable', async (req, reply) => {
    if (!allow(req, reply, 'operators:manage')) return reply;
    const id = /^\d{1,15}$/.test(req.params.id) ? Number(req.params.id) : 0;
    try {
      const by = `operator:${req.console!.operator.username}`;
      const row = await auditedWrite(ctx, req, by, { operator_id: id }, () => disableOperator(ctx.db, id, req.console!.operator.id), (r) => ({ username: r.username }));
      return kit.flashAndBack(req, reply, 'ok', `Operator ${row.username} disabled; their sessions ended.`, '/console/operators');
    } catch (err) {
      return kit.flashAndBack(req, reply, 'error', refusalText(err), '/console/operators');
    }
  });

  app.post('/console/operators', async (req, reply) => {
    if (!allow(req, reply, 'operators:manage')) return reply;
    const f = req.body as Form;
    const username = (one(f, 'username') ?? '').trim().toLowerCase();
    const role = one(f, 'role');
    if (!isOperatorRole(role)) return page(reply, layout(req, 'Operators', await list(req, 'Choose a role.'), '/console/operators'), 422);
    try {
      const by = `operator:${req.console!.operator.username}`;
      const { operator, totpSecret } = await auditedWrite(ctx, req, by, { username, role }, () =>
        createOperator(ctx.db, { username, password: one(f, 'password') ?? '', role, createdBy: by }), (r) => ({ operator_id: r.operator.id }),
      );
      return page(reply, layout(req, `Operator ${operator.username} created`, html`<p>Hand this to ${operator.username} over a safe channel; it is not shown again.</p>${enrollment(operator.username, totpSecret, false)}`, '/console/operators'));
    } catch (err) {
      return page(reply, layout(req, 'Operators', await list(req, refusalText(err)), '/console/operators'), 422);
    }
  });
}

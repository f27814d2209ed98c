import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { acceptInvitation, checkPassword, checkTotp, enableTotp, findInvitation, findMember } from '../../auth/members.js';
import { newTotpSecret, totpUri } from '../../auth/totp.js';
import { qrCodeDataUrl } from '../../pix/cashin/qrImage.js';
import { one, type Form } from '../formBody.js';
import { html, type Html } from '../html.js';
import type { Portal } from '../kit.js';
import { createSession, secondFactorPassed, setFlash } from '../session.js';
import { safeNext } from '../stepUp.js';
import { PORTAL_SIGN_IN_PER_MINUTE } from './signIn.js';
import { teamText } from './teamText.js';

/** Second-factor codes a member may try per minute (sign-in and step-up together). */
export const TOTP_TRIES_PER_MINUTE = 5;

/**
 * Team members' pages outside the team page (docs/portal.md "Team members"): sign-in with email
 * and password (/portal/signin), the second factor at sign-in (/portal/signin/totp), setting it
 * up (/portal/account/totp), typing it again for a sensitive action (/portal/step-up), and the
 * one-time set-password link of an invitation (/portal/invite/<token>).
 */
export function memberSignInPages(app: FastifyInstance, portal: Portal) {
  const { ctx, layout, page } = portal;
  const body = (req: FastifyRequest) => (typeof req.body === 'object' && req.body ? req.body : {}) as Form;
  const alert = (message: string | null) => (message ? html`<div class="flash error" role="alert">${message}</div>` : '');

  /** false (and the 429 page sent) when `bucket` is over its limit; a limiter that fails lets through. */
  const limited = async (req: FastifyRequest, reply: FastifyReply, bucket: string, limit: number, again: (msg: string) => string) => {
    try {
      const hit = await ctx.rateCounter.hit(bucket, limit, 60);
      if (hit.allowed) return false;
      void reply.header('retry-after', String(hit.retryAfter));
      page(reply, again(teamText(req.i18n).tooMany), 429);
      return true;
    } catch (err) {
      req.log.warn({ err: (err as Error).message }, 'portal limiter unavailable');
      return false;
    }
  };

  const signInPage = (req: FastifyRequest, message: string | null, email = '') => {
    const t = teamText(req.i18n);
    return layout(
      req,
      t.memberSignIn,
      html`<div class="card login">${alert(message)}
<form class="stack" method="post" action="/portal/signin">
<label>${t.email} <input name="email" type="email" autocomplete="username" required maxlength="254" value="${email}"></label>
<label>${t.password} <input name="password" type="password" autocomplete="current-password" required maxlength="200"></label>
<button type="submit">${t.signInButton}</button></form>
<p><a href="/portal/login">${t.useKeyInstead}</a></p></div>`,
    );
  };

  app.get('/portal/signin', async (req, reply) => page(reply, signInPage(req, null)));

  app.post('/portal/signin', async (req, reply) => {
    const t = teamText(req.i18n);
    const form = body(req);
    const email = (one(form, 'email') ?? '').trim().slice(0, 254);
    if (await limited(req, reply, `portal-sign-in:${portal.clientIp(req)}`, PORTAL_SIGN_IN_PER_MINUTE, (m) => signInPage(req, m, email))) return reply;
    const member = await checkPassword(ctx.db, email, one(form, 'password') ?? '');
    if (!member) return page(reply, signInPage(req, t.wrongPassword, email), 401);
    const [merchant] = await ctx.db.query<{ require_totp: boolean }>('SELECT require_totp FROM merchants WHERE id = $1', [member.merchant_id]);
    const needsSecondFactor = member.totp_secret !== null || merchant?.require_totp === true;
    await createSession(ctx, reply, { memberId: member.id, mfaPending: needsSecondFactor });
    return reply.redirect(needsSecondFactor ? (member.totp_secret ? '/portal/signin/totp' : '/portal/account/totp') : '/portal', 303);
  });

  const codeForm = (req: FastifyRequest, action: string, button: string, extra: Html | string = '') =>
    html`<form class="stack" method="post" action="${action}"><input type="hidden" name="_csrf" value="${req.portal!.csrf}">${extra}
<label>${teamText(req.i18n).code} <input name="code" inputmode="numeric" autocomplete="one-time-code" pattern="[0-9 ]{6,7}" required maxlength="7"></label>
<button type="submit">${button}</button></form>`;

  const totpPage = (req: FastifyRequest, message: string | null) => {
    const t = teamText(req.i18n);
    return layout(req, t.secondFactor, html`<div class="card login">${alert(message)}${codeForm(req, '/portal/signin/totp', t.confirm)}</div>`);
  };

  /** A code of the session's member; false (and counted) when wrong. */
  const codeOk = async (req: FastifyRequest, reply: FastifyReply, again: (m: string) => string): Promise<boolean | 'limited'> => {
    const s = req.portal!;
    if (await limited(req, reply, `portal-totp:${s.member!.id}`, TOTP_TRIES_PER_MINUTE, again)) return 'limited';
    return checkTotp(ctx, s.member!.id, one(body(req), 'code') ?? '');
  };

  app.get('/portal/signin/totp', async (req, reply) => page(reply, totpPage(req, null)));
  app.post('/portal/signin/totp', async (req, reply) => {
    const s = req.portal!;
    if (!s.member) return reply.redirect('/portal', 303);
    const ok = await codeOk(req, reply, (m) => totpPage(req, m));
    if (ok === 'limited') return reply;
    if (!ok) return page(reply, totpPage(req, teamText(req.i18n).wrongCode), 401);
    await secondFactorPassed(ctx, reply, s);
    return reply.redirect('/portal', 303);
  });

  const enrolPage = (req: FastifyRequest, secret: string, message: string | null) => {
    const t = teamText(req.i18n);
    const s = req.portal!;
    const uri = totpUri(secret, s.member!.email);
    return layout(
      req,
      t.enrol,
      html`<div class="card">${alert(message)}${s.requireTotp ? html`<p>${t.enrolRequired}</p>` : ''}<p>${t.enrolIntro}</p>

<img class="qr" alt="${t.qrAlt}" src="${qrCodeDataUrl(uri)}" data-testid="totp-qr">
<p class="label">${t.secretLabel}</p><p class="mono" data-testid="totp-secret">${secret}</p>
<p><a href="${uri}">${t.uriLabel}</a></p>
${codeForm(req, '/portal/account/totp', t.confirm, html`<input type="hidden" name="secret" value="${secret}">`)}</div>`,
    );
  };

  app.get('/portal/account/totp', async (req, reply) => {
    const s = req.portal!;
    if (!s.member) return portal.forbidden(req, reply, 'members:read');
    if (s.member.totp) return page(reply, layout(req, teamText(req.i18n).enrol, html`<p>${teamText(req.i18n).alreadyEnrolled}</p>`));
    return page(reply, enrolPage(req, newTotpSecret(), null));
  });

  app.post('/portal/account/totp', async (req, reply) => {
    const s = req.portal!;
    if (!s.member) return portal.forbidden(req, reply, 'members:read');
    const secret = one(body(req), 'secret') ?? '';
    if (!/^[A-Z2-7]{32}$/.test(secret)) return reply.redirect('/portal/account/totp', 303);
    const again = (m: string) => enrolPage(req, secret, m);
    if (await limited(req, reply, `portal-totp:${s.member.id}`, TOTP_TRIES_PER_MINUTE, again)) return reply;
    const member = await findMember(ctx.db, s.member.id);
    if (!member || !(await enableTotp(ctx, member, secret, one(body(req), 'code') ?? '', portal.clientIp(req)))) {
      return page(reply, again(teamText(req.i18n).wrongCode), 422);
    }
    await secondFactorPassed(ctx, reply, s); // typing a code of the new factor is a second factor
    if (s.mfaPending) return reply.redirect('/portal', 303);
    await setFlash(ctx.db, s, 'ok', teamText(req.i18n).enrolled);
    return reply.redirect(portal.firstPage(s) ?? '/portal/balance', 303); // not /portal: its redirect would spend the message
  });

  const stepUpPage = (req: FastifyRequest, next: string, message: string | null) => {
    const t = teamText(req.i18n);
    const s = req.portal!;
    const inner = !s.member
      ? html`<p>${t.stepUpNotMember}</p>`
      : !s.member.totp
        ? html`<p>${t.stepUpNeedsTotp}</p><p><a class="button" href="/portal/account/totp">${t.setUpTotp}</a></p>`
        : html`<p>${t.stepUpIntro}</p>${codeForm(req, '/portal/step-up', t.confirm, html`<input type="hidden" name="next" value="${next}">`)}`;
    return layout(req, t.stepUp, html`<div class="card login">${alert(message)}${inner}</div>`);
  };

  app.get('/portal/step-up', async (req, reply) => page(reply, stepUpPage(req, safeNext((req.query as Record<string, unknown>).next), null)));
  app.post('/portal/step-up', async (req, reply) => {
    const s = req.portal!;
    const next = safeNext(one(body(req), 'next'));
    if (!s.member?.totp) return page(reply, stepUpPage(req, next, null), 403);
    const ok = await codeOk(req, reply, (m) => stepUpPage(req, next, m));
    if (ok === 'limited') return reply;
    if (!ok) return page(reply, stepUpPage(req, next, teamText(req.i18n).wrongCode), 401);
    await secondFactorPassed(ctx, reply, s);
    await setFlash(ctx.db, s, 'ok', teamText(req.i18n).stepUpDone);
    return reply.redirect(next, 303);
  });

  const invitePage = (req: FastifyRequest, token: string, email: string | null, message: string | null) => {
    const t = teamText(req.i18n);
    return layout(
      req,
      t.invitation,
      html`<div class="card login">${alert(message)}${
        email === null
          ? html`<p>${t.invitationInvalid}</p>`
          : html`<p>${t.invitationFor(email)}</p><form class="stack" method="post" action="/portal/invite/${token}">
<label>${t.newPassword} <input name="password" type="password" autocomplete="new-password" required minlength="12" maxlength="200"></label>
<button type="submit">${t.savePassword}</button></form>`
      }</div>`,
    );
  };

  app.get('/portal/invite/:token', async (req, reply) => {
    const { token } = req.params as { token: string };
    const invited = await findInvitation(ctx.db, token, ctx.wallClock.now());
    return page(reply, invitePage(req, token, invited?.email ?? null, null), invited ? 200 : 404);
  });

  app.post('/portal/invite/:token', async (req, reply) => {
    const { token } = req.params as { token: string };
    const t = teamText(req.i18n);
    if (await limited(req, reply, `portal-sign-in:${portal.clientIp(req)}`, PORTAL_SIGN_IN_PER_MINUTE, (m) => invitePage(req, token, null, m))) return reply;
    const invited = await findInvitation(ctx.db, token, ctx.wallClock.now());
    if (!invited) return page(reply, invitePage(req, token, null, null), 404);
    try {
      await acceptInvitation(ctx, token, one(body(req), 'password') ?? '', portal.clientIp(req));
    } catch (err) {
      const fields = (err as { fields?: Record<string, string[]> }).fields;
      return page(reply, invitePage(req, token, invited.email, fields?.password ? `${t.password}: ${fields.password.join(', ')}` : t.invitationInvalid), 422);
    }
    return page(reply, signInPage(req, null, invited.email).replace('<div class="card login">', `<div class="card login"><div class="flash ok" role="status">${t.passwordSet}</div>`));
  });
}

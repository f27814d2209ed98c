import type { Permission } from '../auth/permissions.js';

/**
 * The OAuth2 scopes of the API Pix façade (the standard's names for the resources pixgate serves)
 * and the pixgate permission each one needs: a key may be granted a scope only when its
 * permissions include that one (docs/api-pix.md, "Scopes").
 */
export const SCOPE_PERMISSION = {
  'cob.write': 'pix:write',
  'cob.read': 'pix:read',
  'cobv.write': 'pix:write',
  'cobv.read': 'pix:read',
  'lotecobv.write': 'pix:write',
  'lotecobv.read': 'pix:read',
  'payloadlocation.write': 'pix:write',
  'payloadlocation.read': 'pix:read',
  'pix.write': 'payment:write',
  'pix.read': 'pix:read',
  'webhook.write': 'account:write',
  'webhook.read': 'account:read',
} as const satisfies Record<string, Permission>;

export type Scope = keyof typeof SCOPE_PERMISSION;

export const SCOPES = Object.keys(SCOPE_PERMISSION) as Scope[];

export function isScope(value: string): value is Scope {
  return Object.hasOwn(SCOPE_PERMISSION, value);
}

/** The scopes a key with `permissions` may be granted, in the table's order. */
export function grantableScopes(permissions: readonly string[]): Scope[] {
  return SCOPES.filter((s) => permissions.includes(SCOPE_PERMISSION[s]));
}

export type ScopeDecision = { granted: Scope[] } | { refused: 'unknown'; scope: string } | { refused: 'beyond_permissions'; scope: Scope } | { refused: 'none_grantable' };

/**
 * The scopes a grant gives: every requested one (space-separated, RFC 6749 §3.3; repeats and extra
 * spaces ignored), or every grantable one when none is requested. An unknown scope, or one the
 * key's permissions do not allow, refuses the whole grant: a client never gets less than it asked
 * without being told.
 */
export function decideScopes(requested: string | undefined, permissions: readonly string[]): ScopeDecision {
  const grantable = grantableScopes(permissions);
  const asked = (requested ?? '').split(' ').filter((s) => s !== '');
  if (asked.length === 0) return grantable.length > 0 ? { granted: grantable } : { refused: 'none_grantable' };
  const granted: Scope[] = [];
  for (const scope of asked) {
    if (!isScope(scope)) return { refused: 'unknown', scope };
    if (!grantable.includes(scope)) return { refused: 'beyond_permissions', scope };
    if (!granted.includes(scope)) granted.push(scope);
  }
  return { granted };
}

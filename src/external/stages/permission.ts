import type { Authenticated } from '../../auth/credentials.js';
import type { Permission } from '../../auth/permissions.js';
import { permissionError, type HttpError } from '../../http/errors.js';
import { auth } from './request.js';
import type { Stage } from './stage.js';

/** Stage 7's refusal of `key` for a route requiring `permission` (null: authentication only). */
export function permissionRefusal(key: Authenticated['key'], permission: Permission | null): HttpError | undefined {
  return permission !== null && !key.permissions.includes(permission) ? permissionError(permission) : undefined;
}

/** Stage 7: the key holds the route's permission (every route declares one, or null). */
export const permissionStage: Stage = {
  n: 7,
  name: 'permission',
  phase: 'preHandler',
  applies: () => true,
  run(req) {
    const permission = req.routeOptions.config.permission;
    if (permission === undefined) throw new Error(`route ${req.routeOptions.url} declares no permission`);
    const refused = permissionRefusal(auth(req).key, permission);
    if (refused) throw refused;
  },
};

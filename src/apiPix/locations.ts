import { randomBytes } from 'node:crypto';
import type { Database } from '../db/db.js';
import { DomainError } from '../errors/catalog.js';
import type { Clock } from '../lib/clock.js';
import * as cobStore from './cobStore.js';
import * as cobvStore from './cobv/store.js';
import * as store from './locationStore.js';
import type { LocationRow, TipoCob } from './locationStore.js';

/**
 * Payload locations (the standard's `loc`): URLs this institution serves a charge's payload at,
 * `<host>/qr/v2/<token>` (the token 128 random bits). A location belongs to an account, is made for
 * `cob` or `cobv`, and is linked to at most one charge at a time; a charge created without one gets
 * a new one. Unlinking (`DELETE /loc/{id}/txid`) leaves the charge without a location (and without
 * a BR Code) and frees the location for another charge.
 */
export interface LocationDeps {
  db: Database;
  clock: Clock;
  config: { apiPixLocationHost: string };
}

/** The path of a location under the host (`/qr/v2/<token>`), served by the payload read. */
export const LOCATION_PATH = '/qr/v2/';

/**
 * A location's URL: `<host>/qr/v2/<token>` for a cob, `<host>/qr/v2/cobv/<token>` for a cobv (the
 * standard reads a cobv's payload at `/cobv/{pixUrlAccessToken}`, with `DPP` and `codMun`).
 */
export function locationUrl(host: string, token: string, tipoCob: TipoCob = 'cob'): string {
  return `${host}${LOCATION_PATH}${tipoCob === 'cobv' ? 'cobv/' : ''}${token}`;
}

export function newLocationToken(): string {
  return randomBytes(16).toString('hex');
}

/** The token of a location URL (`host/qr/v2/<token>`, with or without a scheme), or null. */
export function tokenOfLocationUrl(url: string): string | null {
  const m = /^(?:https?:\/\/)?[^/]+\/qr\/v2\/(?:cobv\/)?([0-9a-f]{32})$/.exec(url);
  return m ? m[1]! : null;
}

export async function createLocation(deps: LocationDeps, accountId: number, tipoCob: TipoCob): Promise<LocationRow> {
  return store.insertLocation(deps.db, accountId, tipoCob, newLocationToken(), deps.clock.now());
}

export async function getLocation(deps: LocationDeps, accountId: number, id: number): Promise<LocationRow> {
  const row = await store.findLocation(deps.db, accountId, id);
  if (!row) throw new DomainError('not_found', { message: `Location ${id} não encontrada` });
  return row;
}

export async function listLocations(deps: LocationDeps, filter: store.LocationFilter) {
  return store.listLocations(deps.db, filter);
}

/** DELETE /loc/{id}/txid: the location freed of its charge (none linked: as it is). */
export async function unlinkLocation(deps: LocationDeps, accountId: number, id: number): Promise<LocationRow> {
  return deps.db.transaction(async (tx) => {
    const row = await store.lockLocation(tx, accountId, id);
    if (!row) throw new DomainError('not_found', { message: `Location ${id} não encontrada` });
    if (row.txid !== null) {
      await cobStore.unlinkLocation(tx, id, deps.clock.now());
      await cobvStore.unlinkLocation(tx, id, deps.clock.now());
    }
    return { ...row, txid: null };
  });
}

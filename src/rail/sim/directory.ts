import { UNIQUE_VIOLATION, sqlState } from '../../db/db.js';
import { bankName } from '../../lib/banks.js';
import { Batcher, type BatchOutcome } from '../../lib/batcher.js';
import { KeyAlreadyRegisteredError, type DirectoryEntry, type KeyDirectory, type KeyRegistration } from '../rail.js';
import { batchOptions, type SimulatorOptions } from './options.js';
import * as store from './store.js';

/**
 * The simulated directory (DICT), table `sim_dict_entries`: this institution's keys, registered and
 * removed by the key service, and other institutions' keys (sandbox `/dict/keys`,
 * `SandboxControls.registerForeignKey`). The look-ups of one event-loop turn are answered by one
 * statement (issue 12).
 */
export class SimDirectory implements KeyDirectory {
  private readonly lookups: Batcher<string, DirectoryEntry | null>;

  constructor(private readonly options: SimulatorOptions) {
    this.lookups = new Batcher({ ...batchOptions(options, 'sim_lookup'), run: (keys) => this.lookupKeys(keys) });
  }

  async registerKey(r: KeyRegistration): Promise<void> {
    try {
      await this.options.db.query(
        `INSERT INTO sim_dict_entries (key, type, name, document, ispb, bank_name, account_id)
         VALUES ($1, $2, $3, $4, $5, $6, $7)`,
        [r.key, r.type, r.name, r.document, this.options.institutionIspb, this.options.institutionName, r.accountId],
      );
    } catch (err) {
      if (sqlState(err) === UNIQUE_VIOLATION) throw new KeyAlreadyRegisteredError(`key ${r.key} is already registered`);
      throw err;
    }
  }

  async removeKey(key: string): Promise<void> {
    await this.options.db.query('DELETE FROM sim_dict_entries WHERE key = $1 AND ispb = $2', [key, this.options.institutionIspb]);
  }

  lookupKey(key: string): Promise<DirectoryEntry | null> {
    return this.lookups.submit(key);
  }

  /** The look-ups of one batch in one statement; each key answered with its entry or null. */
  private async lookupKeys(keys: string[]): Promise<BatchOutcome<DirectoryEntry | null>[]> {
    const rows = await store.findDictEntries(this.options.db, keys);
    return keys.map((key) => {
      const row = rows.get(key);
      if (!row) return { ok: true, value: null };
      return {
        ok: true,
        value: {
          key: row.key,
          type: row.type,
          name: row.name,
          document: row.document,
          ispb: row.ispb,
          bankName: row.bank_name ?? bankName(row.ispb, { ispb: this.options.institutionIspb, name: this.options.institutionName }),
          accountId: row.account_id,
          fraudFlagged: row.fraud_flagged,
        },
      };
    });
  }
}

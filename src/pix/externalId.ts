/**
 * The spec's `external_id` rule (cash-out, and cash-in charges and their `tag` likewise): after
 * trimming, 1 to 128 bytes from `a-zA-Z0-9._:-` (all one-byte characters, so bytes = characters).
 */
export const EXTERNAL_ID = /^[a-zA-Z0-9._:-]{1,128}$/;
export const EXTERNAL_ID_MESSAGE = 'must be 1 to 128 characters from a-z A-Z 0-9 . _ : -';

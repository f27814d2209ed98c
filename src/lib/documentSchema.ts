import { z } from 'zod';
import { documentProblemMessage, readDocument } from './documents.js';

/**
 * The one request-field schema of a CPF or CNPJ (numeric or alphanumeric): the text becomes the
 * canonical document (CPF 11 digits, CNPJ 14 upper-case characters), or the field is refused with
 * the reason. `canonical`: only the canonical spelling is accepted (operator and sandbox APIs);
 * otherwise the usual punctuation and lower-case letters are read too.
 */
export function taxDocument(options: { canonical?: boolean; invalidMessage?: string } = {}) {
  return z.string().transform((text, ctx) => {
    const reading = readDocument(text, { canonical: options.canonical });
    if ('value' in reading) return reading.value;
    ctx.addIssue({ code: 'custom', message: options.invalidMessage ?? documentProblemMessage(reading)! });
    return z.NEVER;
  });
}

/**
 * How the simulated central bank judges a return (devolução) of a PIX: the spec's return codes and
 * deadlines (Refund, rule 4). pixgate does not enforce these locally: refunds are accepted and the
 * rail rejects late or invalid ones afterwards (`pix.refund.failed`).
 *
 *   MD06           requested by the payer ........................ 90 calendar days
 *   BE08, FR01     fraud / error, regulatory dispute deadline .... 80 calendar days (MED)
 *   AM09, SL02, RR04  decided case by case ....................... 30 calendar days
 */
export const RETURN_CODES = ['MD06', 'BE08', 'AM09', 'SL02', 'RR04', 'FR01'] as const;
export type ReturnCode = (typeof RETURN_CODES)[number];

const DEADLINE_DAYS: Record<ReturnCode, number> = { MD06: 90, BE08: 80, FR01: 80, AM09: 30, SL02: 30, RR04: 30 };
const DAY_MS = 86_400_000;

/** Rejection reason codes the simulated rail reports (`reason_code` of the failure events). */
export const REJECTION = {
  invalidReturnCode: { code: 'INVALID_RETURN_CODE', reason: 'Return code is not one of MD06, BE08, AM09, SL02, RR04, FR01' },
  deadlineExceeded: { code: 'RETURN_DEADLINE_EXCEEDED', reason: 'Return deadline for this return code has passed' },
  amountExceeded: { code: 'RETURN_AMOUNT_EXCEEDED', reason: 'Return amount exceeds what remains of the original payment' },
  originalNotFound: { code: 'ORIGINAL_NOT_FOUND', reason: 'Original payment not found at the central bank' },
  originalNotSettled: { code: 'ORIGINAL_NOT_SETTLED', reason: 'Original payment is not settled' },
  byReceiver: { code: 'REJECTED_BY_RECEIVER', reason: 'Payment rejected by the receiving institution' },
  keyNotFound: { code: 'KEY_NOT_FOUND', reason: 'PIX key not registered in the directory' },
  sameInstitution: { code: 'SAME_INSTITUTION', reason: 'Receiver is in the paying institution' },
} as const;

export type Rejection = (typeof REJECTION)[keyof typeof REJECTION];

export function isReturnCode(code: string): code is ReturnCode {
  return (RETURN_CODES as readonly string[]).includes(code);
}

/** Why a return would be refused, or null when it is within the rules. */
export function returnProblem(input: {
  returnCode: string;
  originalAt: Date;
  now: Date;
  amount: number;
  remaining: number;
}): Rejection | null {
  if (!isReturnCode(input.returnCode)) return REJECTION.invalidReturnCode;
  if (input.now.getTime() - input.originalAt.getTime() > DEADLINE_DAYS[input.returnCode] * DAY_MS) return REJECTION.deadlineExceeded;
  if (input.amount > input.remaining) return REJECTION.amountExceeded;
  return null;
}

/**
 * The CLI's exit codes. Scripts branch on them, so they are a contract (docs/cli.md):
 * they separate "the server said no" from "you typed it wrong" from "nobody answered",
 * because each needs a different next step from the operator.
 */
export const EXIT_OK = 0;
/** A server answered with a Connect error (refused, fenced out, conflict, ...). */
export const EXIT_REFUSED = 1;
/**
 * Bad command line, bad endpoint configuration (including TLS material the server's handshake
 * refuses: no certificate, a wrong CA), or a confirmation that was declined. Nothing was changed.
 */
export const EXIT_USAGE = 2;
/** The endpoint (or a dependency behind it) is unreachable / unavailable: retry later. */
export const EXIT_UNREACHABLE = 3;
/** The thing asked for does not exist (Connect not_found). */
export const EXIT_NOT_FOUND = 4;
/** `railfence check` found invariant violations (the report names them). */
export const EXIT_VIOLATIONS = 5;
/**
 * A call with an effect (`payouts create`) got no answer: it may or may not have been carried
 * out (a reset connection, a deadline, a torn stream). Never "refused": repeat it with the same
 * Idempotency-Key, which returns the payout if it exists and creates it once if not.
 */
export const EXIT_OUTCOME_UNKNOWN = 6;

/** A command-line or configuration mistake, reported with EXIT_USAGE before any call is made. */
export class UsageError extends Error {
  constructor(
    message: string,
    /** The usage line to print after the message, when one applies. */
    readonly usage?: string,
  ) {
    super(message);
    this.name = "UsageError";
  }
}
